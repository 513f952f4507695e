"""The shape of the code: no import cycle, core modules know no backend, a ptrace run loads no Delve."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sampler"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports() -> dict[str, set[str]]:
    """Every module of sampler -> the sampler modules it imports (anywhere in it)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sampler"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("sampler")}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_import_cycle() -> None:
    graph = imports()
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


def test_core_modules_know_no_backend() -> None:
    graph = imports()
    for core in ("sampler.safety.guardian", "sampler.safety.journal", "sampler.safety.repair", "sampler.target.procfs", "sampler.session",
                 "sampler.sample", "sampler.output.csv", "sampler.target.permission", "sampler.target.process"):
        assert not any(m.startswith("sampler.backends") and m != "sampler.backends.base"
                       for m in graph[core]), (core, graph[core])


def test_backends_never_import_the_cli_or_the_writers() -> None:
    graph = imports()
    for module, imported in graph.items():
        if module.startswith("sampler.backends"):
            assert not {m for m in imported if m == "sampler.cli" or m.startswith("sampler.output")}, module


def test_a_ptrace_run_loads_no_delve_code() -> None:
    code = ("import sys; from sampler.backends.ptrace import backend; import sampler.cli; "
            "print(sorted(m for m in sys.modules if 'delve' in m))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
