"""kubectl sampler attach end to end, with a stand-in for kubectl (no cluster runs here):
the stand-in answers `get` and `version` with a running pod's JSON and runs the command
that `debug` or `exec` would run in the container, here; sampler, its wrapper, the rows
streamed back and Ctrl-C are real."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.targets import ROOT, Target, read_csv

FAKE_KUBECTL = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
log = os.environ["FAKE_KUBECTL_LOG"]
with open(log, "a") as f:
    f.write(json.dumps(args) + "\n")
if args[0] == "get" and args[1] == "pod":
    print(json.dumps({"metadata": {"name": args[2], "namespace": "shop"},
                      "spec": {"nodeName": "n1", "containers": [{"name": "app"}]},
                      "status": {"phase": "Running",
                                 "containerStatuses": [{"name": "app", "containerID": "containerd://abc"}]}}))
elif args[0] == "get" and args[1] == "namespace":
    print(json.dumps({"metadata": {"name": args[2]}}))
elif args[0] == "version":
    print(json.dumps({"serverVersion": {"major": "1", "minor": "30"}}))
elif args[0] in ("debug", "exec"):
    command = args[args.index("--") + 1:]
    command = [os.environ["SAMPLER_BIN"] if a == "/opt/sampler/bin/sampler" else a for a in command]
    os.execvp(command[0], command)
else:
    sys.exit("fake kubectl: " + " ".join(args))
'''


def fake_kubectl(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "bin"
    folder.mkdir()
    kubectl = folder / "kubectl"
    kubectl.write_text(FAKE_KUBECTL.replace("/usr/bin/env python3", sys.executable))
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}", "FAKE_KUBECTL_LOG": str(tmp_path / "calls"),
            "SAMPLER_BIN": str(ROOT / ".venv" / "bin" / "sampler")}


def plugin(*args: str) -> list[str]:
    return [sys.executable, "-c", "from sampler.kube.cli import entry; entry()", *args]


def test_attach_streams_the_rows_back_and_ctrl_c_ends_it_cleanly(start_target: Callable[..., Target],
                                                                 tmp_path: Path) -> None:
    # GIVEN a running target, and kubectl sampler attach to "its pod", rows to a local file
    target = start_target("ringbuf-c")
    env = fake_kubectl(tmp_path)
    out = tmp_path / "rows.csv"
    proc = subprocess.Popen(plugin("attach", "web-0", "-c", "app", "--out", str(out), "--", "--pgrep",
                                   "^ringbuf-c$", "--backend", "ptrace", "--at", "ring_read",
                                   "--expr", "delta=b->w - b->r", "--rate", "20"),
                            env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (out.exists() and len(out.read_text().splitlines()) > 5):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    # WHEN the user presses Ctrl-C
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    # THEN the remote sampler stopped cleanly: its summary came, the rows are whole, the target lives
    assert proc.returncode == 0, stderr
    assert "stopped by SIGTERM" in stderr and "target left running" in stderr, stderr
    rows = read_csv(out)
    assert len(rows) >= 5 and all(0 <= int(r["delta"]) <= 20000 for r in rows)
    assert out.read_text().endswith("\n")
    target.assert_untouched()
    # and kubectl was asked for the pod, its namespace, the server, then an ephemeral container
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    assert [c[0] for c in calls] == ["get", "get", "version", "debug"]
    assert "--profile=general" in calls[3] and "--target=app" in calls[3] and "--namespace=shop" in calls[3]


def test_a_blocker_is_named_before_anything_runs(tmp_path: Path) -> None:
    env = fake_kubectl(tmp_path)
    result = subprocess.run(plugin("attach", "web-0", "-c", "nosuch", "--", "--expr", "x"), env=env,
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.strip() == "sampler: pod web-0 has no container 'nosuch' (it has app)"
    calls = [json.loads(line)[0] for line in (tmp_path / "calls").read_text().splitlines()]
    assert "debug" not in calls and "exec" not in calls
