"""The kubectl-calling layer: the commands and manifests it produces, and the preflight."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from sampler.errors import UsageError
from sampler.kube import manifests, preflight, yaml
from sampler.kube.cli import remote_args, with_default_target


def test_the_ephemeral_way_is_kubectl_debug_with_the_general_profile() -> None:
    argv = manifests.debug_command("web-0", "shop", "app", "reg/sampler:1", ["attach", "--expr", "w-r", "--out", "-"])
    assert argv[:7] == ["kubectl", "debug", "web-0", "--quiet", "-i", "--image=reg/sampler:1", "--profile=general"]
    assert "--namespace=shop" in argv and "--target=app" in argv
    script = argv[argv.index("--") + 1:]
    assert script[:2] == ["/bin/sh", "-c"] and script[3:] == ["sampler", manifests.SAMPLER, "attach", "--expr",
                                                               "w-r", "--out", "-"]


def test_the_remote_sampler_is_stopped_cleanly_when_kubectl_goes() -> None:
    # GIVEN the wrapper around a stand-in for sampler that says how it ended
    script = manifests.remote_command([])[2]
    stand_in = "trap 'echo interrupted; exit 0' TERM; echo started; while :; do sleep 0.05; done"
    proc = subprocess.Popen(["/bin/sh", "-c", script, "sampler", "/bin/sh", "-c", stand_in],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "started"
    time.sleep(0.5)
    assert proc.poll() is None  # it goes on while kubectl's stream is open
    # WHEN kubectl's stream closes (the user pressed Ctrl-C)
    proc.stdin.close()
    # THEN sampler got SIGTERM (it detaches and resumes the target) and the wrapper ends with it
    try:
        assert proc.stdout.readline().strip() == "interrupted"
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_the_remote_sampler_that_ends_by_itself_ends_the_wrapper() -> None:
    # kubectl's stream stays open (a closed one means the user left: the wrapper then sends
    # SIGTERM, which could reach the stand-in before its own exit)
    script = manifests.remote_command([])[2]
    proc = subprocess.Popen(["/bin/sh", "-c", script, "sampler", "/bin/sh", "-c", "exit 3"], stdin=subprocess.PIPE)
    try:
        assert proc.wait(timeout=10) == 3
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()


def test_rows_come_back_over_the_stream_and_the_entrypoint_is_the_default_target() -> None:
    assert remote_args(["--expr", "w-r"]) == ["attach", "--expr", "w-r", "--out", "-"]
    assert with_default_target(["attach", "--expr", "x"])[-2:] == ["--pid", "1"]
    assert with_default_target(["attach", "--pgrep", "srv"]) == ["attach", "--pgrep", "srv"]
    assert with_default_target(["attach", "--all", "--expr", "x"])[-2:] == ["--pgrep", "."]  # every process
    with pytest.raises(UsageError):
        remote_args(["--expr", "x", "--out", "rows.csv"])


def test_the_node_agent_is_least_privilege() -> None:
    docs = manifests.node_agent("sampler-system", "reg/sampler:1")
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Namespace", "ServiceAccount", "Role", "DaemonSet"]
    spec = docs[3]["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert spec["hostPID"] is True and container["image"] == "reg/sampler:1"
    assert container["securityContext"] == {"capabilities": {"drop": ["ALL"], "add": ["SYS_PTRACE"]},
                                            "privileged": False, "allowPrivilegeEscalation": False,
                                            "readOnlyRootFilesystem": True,
                                            "seccompProfile": {"type": "RuntimeDefault"}}
    assert docs[2]["rules"][1] == {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}
    assert spec["automountServiceAccountToken"] is False
    # what it writes goes to emptyDir volumes, under a read-only root
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts == {"/run": "run", "/tmp": "tmp"}
    assert spec["volumes"] == [{"name": "run", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]
    # worker nodes only, tainted pools included: control-plane nodes excluded by their labels
    assert spec["tolerations"] == [{"operator": "Exists"}]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"},
        {"key": "node-role.kubernetes.io/master", "operator": "DoesNotExist"}]}]
    everywhere = manifests.node_agent("sampler-system", "reg/sampler:1", all_nodes=True)[3]["spec"]["template"]["spec"]
    assert everywhere["tolerations"] == [{"operator": "Exists"}] and "affinity" not in everywhere


def test_the_shared_pod_without_ptrace_drops_every_capability() -> None:
    pod = manifests.shared_pod("p", "debian", ["/t"], ["attach", "--pgrep", "t"], capability=False,
                               volumes={"/host/bin": "/targets"})
    sampler = pod["spec"]["containers"][1]
    assert pod["spec"]["shareProcessNamespace"] is True
    assert sampler["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["volumes"] == [{"name": "v0", "hostPath": {"path": "/host/bin", "type": "Directory"}}]


def test_the_yaml_quotes_what_would_read_as_another_type() -> None:
    text = yaml.dump([{"a": ["--count", "5", "true", "w-r", 'say "x"'], "b": {}, "c": True}])
    assert text == 'a:\n  - "--count"\n  - "5"\n  - "true"\n  - w-r\n  - "say \\"x\\""\nb: {}\nc: true\n'


POD = {"metadata": {"name": "web-0", "namespace": "shop"},
       "spec": {"nodeName": "n1", "containers": [{"name": "app"}]},
       "status": {"phase": "Running", "containerStatuses": [{"name": "app", "containerID": "containerd://abc123"}]}}


@pytest.mark.parametrize("pod,namespace,server,node,expected", [
    (POD, {"metadata": {"name": "shop"}}, {"serverVersion": {"minor": "30"}}, False, None),
    (POD, {"metadata": {"name": "shop", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}},
     None, False, "enforces Pod Security level 'baseline', which rejects a container that adds SYS_PTRACE"),
    (POD, {"metadata": {"name": "shop", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
     None, True, None),  # the node agent runs in its own namespace
    (POD, {}, {"serverVersion": {"minor": "22"}}, False, "no ephemeral containers (1.23+)"),
    ({**POD, "spec": {**POD["spec"], "securityContext": {"runAsNonRoot": True}}}, {}, None, False,
     "runs its containers as non-root"),
    ({**POD, "status": {"phase": "Pending"}}, {}, None, False, "is Pending"),
])
def test_preflight_names_the_blocker(pod: dict, namespace: dict, server: dict | None, node: bool,  # type: ignore[type-arg]
                                     expected: str | None) -> None:
    found = preflight.blocker(pod, namespace, server, "app", node)
    assert (found is None) if expected is None else (found is not None and expected in found), found


def test_the_container_id_drops_the_runtime_prefix() -> None:
    assert preflight.container_id(POD, "app") == "abc123"
    assert preflight.container_id(POD, None) == "abc123"


def test_kubectl_sampler_is_a_real_command() -> None:
    result = subprocess.run([sys.executable, "-c", "from sampler.kube.cli import entry; entry()", "manifest",
                             "agent"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "kind: DaemonSet" in result.stdout and "hostPID: true" in result.stdout
    bad = subprocess.run([sys.executable, "-c", "from sampler.kube.cli import entry; entry()", "manifest", "shared",
                          "--target-image", "x", "--target-command", "/t", "--volume", "nocolon"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "HOST:PATH" in bad.stderr


MINE = "a" * 64
THEIRS = "b" * 64


@pytest.mark.parametrize("cgroup", [
    f"0::/system.slice/docker-{MINE}.scope\n",
    f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-{MINE}.scope\n",
    f"12:memory:/kubepods/burstable/pod1234/{MINE}\n11:pids:/kubepods/burstable/pod1234/{MINE}\n",
    f"0::/machine.slice/libpod-{MINE}.scope/container\n",
    f"5:memory:/libpod_parent/libpod-{MINE}\n",
    # a container given a cgroup subtree of its own named a child after another container's ID
    f"0::/machine.slice/libpod-{MINE}.scope/container/{THEIRS}\n",
    f"0::/system.slice/docker-{MINE}.scope/docker-{THEIRS}.scope\n",
])
def test_a_container_id_is_its_cgroups_first_container_component(cgroup: str) -> None:
    from sampler.target.pgrep import container_of

    assert container_of(cgroup) == MINE


def test_a_process_outside_containers_has_no_container_id() -> None:
    from sampler.target.pgrep import container_of

    assert container_of("0::/user.slice/user-0.slice/session-3.scope\n") is None
    assert container_of(f"0::/user.slice/{THEIRS[:40]}\n") is None  # (not an ID's 64 digits)
    # a user's own subtree (systemd delegates it): whatever its cgroups are named, no runtime's container
    assert container_of(f"0::/user.slice/user-1000.slice/user@1000.service/app.slice/{THEIRS}\n") is None
    assert container_of(f"0::/user.slice/user-1000.slice/user@1000.service/docker-{THEIRS}.scope\n") is None
