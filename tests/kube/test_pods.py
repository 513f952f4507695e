"""sampler where the services run: real containers with podman, from the manifests that
`kubectl sampler manifest` prints (make kube-test; no Kubernetes cluster can run here).

- a pod whose target and sampler share the process namespace, sampler with only
  SYS_PTRACE (what `kubectl debug --target --profile=general` gives): played with
  `podman kube play`;
- the same pod without SYS_PTRACE: one line naming the missing capability;
- the node agent (hostPID, only SYS_PTRACE) sampling a target in another container,
  found by its container ID through /proc/*/cgroup: podman 4.3's `kube play` ignores
  hostPID, so its pod's container spec runs with `podman run --pid=host`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from sampler import __version__
from tests.integration.targets import BIN, ROOT, assert_text_matches_file, read_csv

IMAGE = f"localhost/sampler:{__version__}"
BASE = "localhost/sampler-base:bookworm"
PODMAN = ["podman", "--runtime", "runc"]
CAPACITY = 20000


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, *args], capture_output=True, text=True, check=check, timeout=timeout)


def remove(*names: str) -> None:
    """Each container by itself: podman rm of several stops at the first that does not exist."""
    for name in names:
        podman("rm", "-f", "--time", "0", name, check=False)


def kubectl_sampler(*args: str) -> str:
    result = subprocess.run([sys.executable, "-c", "from sampler.kube.cli import entry; entry()", *args],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="session")
def image() -> str:
    """The base made from Debian's packages and sampler's image (make image does the same)."""
    subprocess.run(["bash", "deploy/podman-setup.sh"], cwd=ROOT, check=True)
    subprocess.run(["make", "-s", "targets"], cwd=ROOT, check=True)
    env = {**os.environ, "SAMPLER_LOCAL_BASE": "1"}
    subprocess.run(["bash", "deploy/build-image.sh"], cwd=ROOT, check=True, env=env, timeout=900)
    return IMAGE


class Container:
    """A container's main process, seen from the host."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pid = int(podman("inspect", name, "--format", "{{.State.Pid}}").stdout)

    def status(self) -> dict[str, str]:
        text = Path(f"/proc/{self.pid}/status").read_text()
        return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)

    def throughput_lines(self) -> int:
        return sum(1 for line in podman("logs", self.name).stdout.splitlines() if line.startswith("reads/s="))

    def assert_untouched(self) -> None:
        """Alive, not traced, not stopped, still working, its code the file's."""
        assert podman("inspect", self.name, "--format", "{{.State.Running}}").stdout.strip() == "true"
        status = self.status()
        assert status["TracerPid"].strip() == "0", "target is still traced"
        assert not status["State"].startswith(("T", "t")), status["State"]
        seen = self.throughput_lines()
        deadline = time.monotonic() + 10
        while self.throughput_lines() < seen + 2:
            assert time.monotonic() < deadline, "the target prints no more throughput lines"
            time.sleep(0.2)
        assert_text_matches_file(SimpleNamespace(pid=self.pid))  # type: ignore[arg-type]


def wait_exited(name: str, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while True:
        state = podman("inspect", name, "--format", "{{.State.Status}} {{.State.ExitCode}}").stdout.split()
        if state[0] in ("exited", "stopped"):
            return int(state[1])
        assert time.monotonic() < deadline, f"{name} is still {state[0]}"
        time.sleep(0.2)


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def played(tmp_path: Path) -> Iterator[list[Path]]:
    manifests: list[Path] = []
    yield manifests
    for manifest in manifests:
        podman("kube", "down", str(manifest), check=False)


def shared_pod(name: str, out: Path, sampler_args: list[str], without_ptrace: bool = False) -> str:
    return kubectl_sampler("manifest", "shared", "--name", name, "--image", IMAGE, "--target-image", BASE,
                           "--target-command", "/targets/ringbuf-go", "--volume", f"{BIN}:/targets",
                           "--volume", f"{out}:/out", *(["--without-ptrace"] if without_ptrace else []),
                           "--", *sampler_args)


def test_sampler_beside_the_target_with_only_sys_ptrace(image: str, out: Path, tmp_path: Path,
                                                        played: list[Path]) -> None:
    # GIVEN the pod kubectl sampler describes: the Go target, and sampler in its process
    # namespace with SYS_PTRACE only, finding the target by name
    manifest = tmp_path / "shared.yaml"
    manifest.write_text(shared_pod("kt-shared", out, [
        "--pgrep", "ringbuf-go", "--backend", "ptrace", "--at", "main.(*Ring).Read", "--expr", "delta=b.w-b.r",
        "--expr", "cap=len(b.buf)", "--count", "8", "--interval", "0.2s", "--out", "/out/samples.csv"]))
    # WHEN the pod is played
    podman("kube", "play", str(manifest))
    played.append(manifest)
    # THEN sampler ends by itself with every row whole, and the target runs on untouched
    assert wait_exited("kt-shared-sampler") == 0, podman("logs", "kt-shared-sampler").stderr
    rows = read_csv(out / "samples.csv")
    assert len(rows) == 8 and all(r["error"] == "" for r in rows), rows
    assert all(0 <= int(r["delta"]) <= CAPACITY and int(r["cap"]) == CAPACITY for r in rows)
    assert all(int(r["pause_us"]) > 0 for r in rows)  # a breakpoint was hit: a thread stopped
    said = podman("logs", "kt-shared-sampler").stderr
    assert "8 samples (0 with errors)" in said and "target left running" in said
    Container("kt-shared-target").assert_untouched()


def test_without_sys_ptrace_one_line_names_the_capability(image: str, out: Path, tmp_path: Path,
                                                          played: list[Path]) -> None:
    manifest = tmp_path / "noptrace.yaml"
    manifest.write_text(shared_pod("kt-noptrace", out, [
        "--pgrep", "ringbuf-go", "--backend", "ptrace", "--expr", "w-r", "--count", "3", "--out", "/out/np.csv"],
        without_ptrace=True))
    podman("kube", "play", str(manifest))
    played.append(manifest)
    assert wait_exited("kt-noptrace-sampler") == 2
    lines = [line for line in podman("logs", "kt-noptrace-sampler").stderr.splitlines() if line.startswith("sampler")]
    assert len(lines) == 1, lines
    assert "in a container started without SYS_PTRACE" in lines[0] and "capabilities.add" in lines[0]
    assert not (out / "np.csv").exists()
    Container("kt-noptrace-target").assert_untouched()


def test_the_node_agent_finds_a_target_of_another_container_by_its_id(image: str, out: Path) -> None:
    # GIVEN the C target in a container of its own
    name, agent = "kt-node-target", "kt-node-agent"
    remove(name, agent)
    podman("run", "-d", "--name", name, "-v", f"{BIN}:/targets", BASE, "/targets/ringbuf-c")
    try:
        identifier = podman("inspect", name, "--format", "{{.Id}}").stdout.strip()
        # WHEN the node agent's pod (hostPID, only SYS_PTRACE) runs sampler on that container's ID
        pod = json.loads(kubectl_sampler(
            "manifest", "agent", "--pod", agent, "--image", IMAGE, "--volume", f"{out}:/out", "--json", "--",
            "/opt/sampler/bin/sampler", "attach", "--container", identifier, "--backend", "ptrace",
            "--at", "ring_read", "--expr", "delta=b->w - b->r", "--count", "6", "--rate", "10",
            "--out", "/out/node.csv"))
        spec = pod["spec"]
        [container] = spec["containers"]
        assert spec["hostPID"] is True
        security = container["securityContext"]
        capabilities = security["capabilities"]
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}  # podman's default profile is on
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = [(volumes[m["name"]], m["mountPath"]) for m in container["volumeMounts"]]
        flags = ["--pid=host" if spec["hostPID"] else "--pid=private",
                 *(f"--cap-drop={c}" for c in capabilities["drop"]), *(f"--cap-add={c}" for c in capabilities["add"]),
                 "--security-opt=no-new-privileges", *(["--read-only"] if security["readOnlyRootFilesystem"] else []),
                 *(f"-v={v['hostPath']['path']}:{path}" if "hostPath" in v else f"--tmpfs={path}"
                   for v, path in mounts)]
        podman("run", "--name", agent, *flags, "--entrypoint", container["command"][0], container["image"],
               *container["command"][1:], check=False, timeout=120)
        # THEN it sampled that container's program, through the host's PIDs
        assert wait_exited(agent) == 0, podman("logs", agent).stderr
        rows = read_csv(out / "node.csv")
        target = Container(name)
        assert len(rows) == 6 and {r["pid"] for r in rows} == {str(target.pid)}
        assert all(0 <= int(r["delta"]) <= CAPACITY for r in rows)
        target.assert_untouched()
    finally:
        remove(name, agent)


def test_the_image_reads_stacks_traces_and_profiles_beside_the_target(image: str, out: Path) -> None:
    """The ephemeral container's way (kubectl debug --target): sampler's image in the target
    container's process namespace, with SYS_PTRACE only, under podman's default seccomp filter."""
    # GIVEN the C target in a container of its own
    name = "kt-verbs-target"
    remove(name)
    podman("run", "-d", "--name", name, "-v", f"{BIN}:/targets", BASE, "/targets/ringbuf-c")
    beside = ["run", "--rm", f"--pid=container:{name}", "--cap-drop=ALL", "--cap-add=SYS_PTRACE",
              "--security-opt=no-new-privileges", "-v", f"{out}:/out", IMAGE]
    try:
        target = Container(name)
        # WHEN its stacks are read from the image
        stack = podman(*beside, "stack", "--pgrep", "ringbuf-c", check=False)
        # THEN the reader's thread is there with its frames and lines
        assert stack.returncode == 0, stack.stderr
        assert " in reader" in stack.stdout and "ringbuf.c:" in stack.stdout, stack.stdout
        # WHEN every call of ring_read is traced (int3s: the target has a seccomp filter)
        trace = podman(*beside, "trace", "--pgrep", "ringbuf-c", "--at", "ring_read", "--expr", "delta=b->w - b->r",
                       "--max-events", "300", "--quiet", "--out", "/out/trace.csv", check=False)
        assert trace.returncode == 0, trace.stderr
        rows = read_csv(out / "trace.csv")
        assert len(rows) == 300 and all(0 <= int(r["delta"]) <= CAPACITY for r in rows)
        # WHEN it is profiled into a flame graph
        profile = podman(*beside, "profile", "--pgrep", "ringbuf-c", "--duration", "2s", "--quiet",
                         "--out", "/out/cpu.svg", check=False)
        assert profile.returncode == 0, profile.stderr
        svg = (out / "cpu.svg").read_text()
        assert svg.lstrip().startswith(("<?xml", "<svg")) and "reader" in svg
        # THEN the target runs on untouched
        target.assert_untouched()
    finally:
        remove(name)
