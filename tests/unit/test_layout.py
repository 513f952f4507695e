"""The shape of the code: the layers of docs/development.md, as rules on imports.

Each rule says which modules (by prefix) may not import which others (by prefix),
anywhere in the module, a function-level import included. A Delve run and a ptrace run
are also started for real (imported in a fresh interpreter) to see what they load.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sampler"

ALLOWED = {
    "sampler.safety": ("sampler.debuginfo.mapped",),
    "sampler.unwind": ("sampler.process.reads",),
    "sampler.evaluation": ("sampler.process.reads",),
    "sampler.python": ("sampler.process.reads",),
    "sampler.session": ("sampler.backends.base",),
    "sampler.sample": (),
}
"""The one module a layer may take from a layer it otherwise may not import (process/reads.py: the memory
protocols, the floor every reader stands on)."""

RULES: list[tuple[str, tuple[str, ...], str]] = [
    ("sampler.process", ("sampler.backends", "sampler.probes", "sampler.config", "sampler.configure",
                         "sampler.evaluation", "sampler.language", "sampler.python", "sampler.inprocess",
                         "sampler.stacks", "sampler.unwind", "sampler.session", "sampler.run", "sampler.cli",
                         "sampler.output", "sampler.report", "sampler.kube", "sampler.profile", "sampler.sample"),
     "the process mechanism (threads, events, memory, bytes) knows no config, expression, plan or row: the "
     "backends, stacks, repair and the guardian use it"),
    ("sampler.probes", ("sampler.backends", "sampler.process", "sampler.session", "sampler.run", "sampler.cli",
                        "sampler.output", "sampler.stacks", "sampler.safety", "sampler.configure"),
     "what goes where is decided from the options and the program's files, before any process is touched: "
     "the backends read it, it reads no backend and no process"),
    ("sampler.debuginfo", ("sampler.backends", "sampler.evaluation", "sampler.config", "sampler.language",
                           "sampler.output", "sampler.safety", "sampler.session", "sampler.run", "sampler.cli",
                           "sampler.report", "sampler.kube", "sampler.inprocess", "sampler.process"),
     "debug info reads files and /proc only: no backend, configuration, expression or output code"),
    ("sampler.target", ("sampler.backends", "sampler.debuginfo", "sampler.evaluation", "sampler.safety",
                        "sampler.session", "sampler.run", "sampler.cli", "sampler.output"),
     "target facts (/proc) are the lowest layer: no backend, no debug info (debuginfo reads them, not back)"),
    ("sampler.safety", ("sampler.backends", "sampler.debuginfo", "sampler.evaluation", "sampler.session",
                        "sampler.run", "sampler.cli", "sampler.output", "sampler.language"),
     "the safety net knows no backend and only the build-id of a mapped file: a backend hands the guardian "
     "its rescue"),
    ("sampler.evaluation", ("sampler.backends", "sampler.target", "sampler.safety", "sampler.session",
                            "sampler.run", "sampler.cli", "sampler.output", "sampler.report", "sampler.kube",
                            "sampler.process"),
     "evaluation reads through process/reads.py's protocols: it knows no backend, no ptrace, no Delve"),
    ("sampler.python", ("sampler.backends", "sampler.inprocess", "sampler.process", "sampler.evaluation",
                        "sampler.stacks", "sampler.target", "sampler.safety", "sampler.session", "sampler.run",
                        "sampler.cli", "sampler.output"),
     "CPython's layouts and objects are read through process/reads.py; the in-process filters that use them "
     "are inprocess/'s"),
    ("sampler.unwind", ("sampler.backends", "sampler.target", "sampler.safety", "sampler.session", "sampler.run",
                        "sampler.cli", "sampler.output", "sampler.report", "sampler.kube", "sampler.stacks",
                        "sampler.profile", "sampler.process"),
     "unwinding reads registers and memory through process/reads.py: no ptrace, no /proc (the caller "
     "gives the mappings)"),
    ("sampler.inprocess", ("sampler.backends", "sampler.target", "sampler.safety", "sampler.session", "sampler.run",
                           "sampler.cli", "sampler.output", "sampler.stacks"),
     "the in-process probes' instruction work knows no ptrace and no process: backends/ptrace writes them"),
    ("sampler.profile", ("sampler.backends", "sampler.debuginfo", "sampler.evaluation", "sampler.unwind",
                         "sampler.target", "sampler.safety", "sampler.session", "sampler.run", "sampler.cli"),
     "a profile's outputs (folded, flame graph, speedscope) take counted stacks: they read no process"),
    ("sampler.stacks", ("sampler.cli", "sampler.run", "sampler.session", "sampler.backends",
                        "sampler.output", "sampler.report", "sampler.kube"),
     "sampler stack reads threads through the process mechanism's snapshots and the unwinder, and prints: "
     "no backend"),
    ("sampler.language", ("sampler.backends", "sampler.evaluation", "sampler.debuginfo", "sampler.target",
                          "sampler.safety", "sampler.session", "sampler.run", "sampler.cli", "sampler.output"),
     "the expression language is shared by every backend and knows none"),
    ("sampler.session", ("sampler.backends", "sampler.evaluation", "sampler.debuginfo", "sampler.cli", "sampler.run"),
     "the session loop sees a backend only through backends/base.py"),
    ("sampler.sample", ("sampler.backends", "sampler.evaluation", "sampler.debuginfo", "sampler.run",
                        "sampler.cli"), "a row is plain data"),
    ("sampler.output", ("sampler.backends", "sampler.evaluation", "sampler.debuginfo", "sampler.cli", "sampler.run"),
     "writers know rows, not backends"),
    ("sampler.backends", ("sampler.cli", "sampler.run", "sampler.output", "sampler.report", "sampler.kube"),
     "backends never import the command line or the writers"),
    ("sampler.backends.delve", ("sampler.backends.ptrace",), "a Delve drive loads no ptrace code"),
    ("sampler.backends.ptrace", ("sampler.backends.delve",), "the ptrace backend loads no Delve code"),
    ("sampler.backends.select", ("sampler.backends.ptrace.", "sampler.backends.delve."),
     "select loads a backend's package only inside build(), for the backend chosen"),
    ("sampler.run", ("sampler.backends.ptrace", "sampler.backends.delve", "sampler.debuginfo.modules"),
     "select.py is the one place that builds a backend (a run of many too): run.py builds none"),
    ("sampler.cli", ("sampler.backends.ptrace", "sampler.backends.delve", "sampler.session", "sampler.target",
                     "sampler.config"),
     "cli.py is click and printing: configure.py decides the run, run.py runs it"),
    ("sampler.configure", ("sampler.backends", "sampler.debuginfo", "sampler.session", "sampler.run", "sampler.cli",
                           "sampler.safety"),
     "the config builder turns options into a run: it knows no backend and reads no program"),
    *((part, ("sampler.process.tracer", "sampler.process.tasks",
              "sampler.process.events", "sampler.process.stepover"),
       "the probe table (every byte written, journaled) and the stats know no thread and no event: a second "
       "kind of probe comes in beside the int3 without the tracer's other parts")
      for part in ("sampler.process.patchtable", "sampler.process.stats")),
    ("sampler.process.events", ("sampler.process.stepover", "sampler.process.tracer"),
     "the tracer's parts meet only in tracer.py (over tasks.py)"),
    ("sampler.process.stepover", ("sampler.process.events", "sampler.process.tracer"),
     "the tracer's parts meet only in tracer.py (over tasks.py)"),
    ("sampler.process.tasks", ("sampler.process.tracer", "sampler.process.events",
                                       "sampler.process.stepover"),
     "the tracer's tasks are the base of its parts: they import none of them"),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(top_level_only: bool = False) -> dict[str, set[str]]:
    """Every module of sampler -> the sampler modules it imports (anywhere in it, or only at
    its top level); a copy the caller may change (the files are parsed once a run)."""
    return {module: set(others) for module, others in _imports(top_level_only).items()}


@functools.lru_cache(maxsize=2)
def _imports(top_level_only: bool) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        tree = ast.parse(path.read_text())
        for node in (tree.body if top_level_only else ast.walk(tree)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sampler"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("sampler")}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def under(module: str, prefix: str) -> bool:
    """``prefix`` names a package or module (``sampler.run`` is not ``sampler.runner``); a
    trailing dot means strictly inside it."""
    if prefix.endswith("."):
        return module.startswith(prefix)
    return module == prefix or module.startswith(prefix + ".")


def test_no_import_cycle() -> None:
    find_cycle(imports())


def folder_of(module: str) -> str:
    """The folder a module lives in (``sampler.backends.ptrace.site``: ``sampler.backends.ptrace``); a module
    directly under sampler/ is its own."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    return module if path.is_dir() or module.count(".") == 1 else module.rsplit(".", 1)[0]


def folders(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Folder -> the folders its modules import. A package and the folders inside it are one house (select.py
    builds the backends beside it, which take base.py's protocol): only other folders' imports count."""
    found: dict[str, set[str]] = {}
    for module, others in graph.items():
        mine = folder_of(module)
        found.setdefault(mine, set())
        for other in others:
            theirs = folder_of(other)
            if theirs != mine and not theirs.startswith(mine + ".") and not mine.startswith(theirs + "."):
                found[mine].add(theirs)
    for others in list(found.values()):
        for other in others:
            found.setdefault(other, set())
    return found


def test_no_folder_knows_another_in_a_circle() -> None:
    find_cycle(folders(imports()))


def find_cycle(graph: dict[str, set[str]]) -> None:
    """AssertionError naming the first import cycle of ``graph``."""
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path, module, other]))
            if other not in state:
                visit(other, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def broken(graph: dict[str, set[str]], layer: str, forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    """(module, what it imports) for each import of ``layer`` that the rule forbids."""
    allowed = ALLOWED.get(layer, ())
    return sorted((m, other) for m in graph if under(m, layer) for other in graph[m]
                  if any(under(other, f) for f in forbidden) and other not in allowed)


@pytest.mark.parametrize("layer, forbidden, why", RULES, ids=[rule[0] for rule in RULES])
def test_each_layer_imports_only_what_it_may(layer: str, forbidden: tuple[str, ...], why: str) -> None:
    graph = imports(top_level_only=layer == "sampler.backends.select")
    assert [m for m in graph if under(m, layer)], f"no module under {layer}: the rule names a layer that does not exist"
    assert not broken(graph, layer, forbidden), f"{why}: {broken(graph, layer, forbidden)}"


def test_the_rules_can_fail() -> None:
    # the checker given imports that break rules finds each, and only those
    graph = imports()
    graph["sampler.evaluation.scope"] = graph["sampler.evaluation.scope"] | {"sampler.process.tracer"}
    graph["sampler.target.procfs"] = graph["sampler.target.procfs"] | {"sampler.debuginfo.elffile"}
    rules = {layer: forbidden for layer, forbidden, _ in RULES}
    assert broken(graph, "sampler.evaluation", rules["sampler.evaluation"]) == \
        [("sampler.evaluation.scope", "sampler.process.tracer")]
    assert broken(graph, "sampler.target", rules["sampler.target"]) == \
        [("sampler.target.procfs", "sampler.debuginfo.elffile")]
    # the one module a layer may take from another is not a break
    graph["sampler.safety.patches"] = graph["sampler.safety.patches"] | {"sampler.debuginfo.mapped"}
    assert broken(graph, "sampler.safety", rules["sampler.safety"]) == []
    # a folder cycle is found (debuginfo taking the in-process probes' relocation back)
    graph["sampler.debuginfo.exits"] = graph["sampler.debuginfo.exits"] | {"sampler.inprocess.relocate"}
    with pytest.raises(AssertionError, match=r"import cycle: .*sampler\.debuginfo -> sampler\.inprocess"):
        find_cycle(folders(graph))
    # and a cycle is found
    graph["sampler.target.procfs"] = graph["sampler.target.procfs"] | {"sampler.target.pgrep"}
    with pytest.raises(AssertionError, match="import cycle"):
        find_cycle(graph)


def test_the_config_builder_and_evaluation_take_no_click_and_no_ptrace() -> None:
    for module in ("configure.py", *(f"evaluation/{p.name}" for p in (PACKAGE / "evaluation").glob("*.py"))):
        tree = ast.parse((PACKAGE / module).read_text())
        taken = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names} | \
            {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not taken & {"click", "ptrace"}, (module, taken & {"click", "ptrace"})


def test_proc_pid_mem_is_opened_by_procfs_alone() -> None:
    opening = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
               if '/mem"' in p.read_text() and p.name != "procfs.py"]
    assert opening == [], f"/proc/PID/mem opened outside target/procfs.py (open_mem): {opening}"


def loaded_by(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", f"import sys; {code}; print(sorted(sys.modules))"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return [m.strip("'") for m in out.stdout.strip().strip("[]").split(", ")]


def test_a_ptrace_run_loads_no_delve_code() -> None:
    loaded = loaded_by("import sampler.cli, sampler.run; from sampler.backends.ptrace import backend")
    assert "sampler.backends.ptrace.backend" in loaded
    assert [m for m in loaded if "delve" in m] == []


def test_numpy_is_loaded_only_where_records_are_read() -> None:
    """numpy (0.13 s to import here; its unpacking is part of every start of the single file) is for the
    in-process probes' records: the commands and the ptrace backend load without it."""
    loaded = loaded_by("import sampler.cli, sampler.run, sampler.stacks, sampler.profile; "
                       "from sampler.backends.ptrace import backend, fleet; from sampler.backends.delve import backend")
    assert "sampler.backends.ptrace.backend" in loaded
    assert [m for m in loaded if m.split(".")[0] == "numpy"] == []
    assert "numpy" in loaded_by("from sampler.backends.ptrace import readrows")


def test_a_delve_run_loads_no_ptrace_code() -> None:
    loaded = loaded_by("import sampler.cli, sampler.run, sampler.evaluation.fields; "
                       "from sampler.backends.delve import backend, rpc_backend")
    assert "sampler.backends.delve.rpc_backend" in loaded and "sampler.evaluation.fields" in loaded
    assert [m for m in loaded if m.startswith("sampler.backends.ptrace")] == []


def test_debug_info_loads_without_any_backend() -> None:
    loaded = loaded_by("from sampler.debuginfo import locate, modules, debugfiles, dwarf")
    assert [m for m in loaded if m.startswith(("sampler.backends", "sampler.language", "sampler.config"))] == []
