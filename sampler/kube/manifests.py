"""What `kubectl sampler` applies or runs, as data: the kubectl debug command of the
ephemeral way, the node agent (namespace, service account, RBAC, DaemonSet), and a Pod
that runs a target beside sampler sharing its process namespace (what the ephemeral
container amounts to, for clusters or tools that play Pod manifests)."""

from __future__ import annotations

from typing import Any

from sampler import __version__

IMAGE = f"localhost/sampler:{__version__}"
"""The image `make image` builds (push it where the cluster pulls from; --image overrides)."""
NAMESPACE = "sampler-system"
AGENT = "sampler-node"
SAMPLER = "/opt/sampler/bin/sampler"
"""Where the image installs sampler."""
ONLY_PTRACE = {"capabilities": {"drop": ["ALL"], "add": ["SYS_PTRACE"]}, "privileged": False,
               "allowPrivilegeEscalation": False}
"""The one capability sampler needs (ptrace and /proc/PID/mem of another process)."""

Manifest = dict[str, Any]


def remote_command(sampler_args: list[str]) -> list[str]:
    """sampler in the container, stopped cleanly (SIGTERM: it detaches and resumes the
    target) when the user's kubectl goes away (Ctrl-C closes its stdin), else ending by
    itself. SIGTERM, not SIGINT: a shell starts its background jobs with SIGINT ignored."""
    # fd 3: the shell gives a background job /dev/null for its standard input
    script = ('exec 3<&0; "$@" & pid=$!; (cat <&3 >/dev/null; kill -TERM $pid 2>/dev/null) & watcher=$!; '
              'exec 3<&-; wait $pid; code=$?; kill $watcher 2>/dev/null; exit $code')
    return ["/bin/sh", "-c", script, "sampler", SAMPLER, *sampler_args]


def debug_command(pod: str, namespace: str | None, container: str | None, image: str,
                  sampler_args: list[str], profile: str = "general") -> list[str]:
    """kubectl debug: an ephemeral container in the pod, in the target container's process
    namespace (--target), with the `general` profile (adds SYS_PTRACE; kubectl 1.27+)."""
    argv = ["kubectl", "debug", pod, "--quiet", "-i", f"--image={image}", f"--profile={profile}"]
    if namespace:
        argv.append(f"--namespace={namespace}")
    if container:
        argv.append(f"--target={container}")
    return [*argv, "--", *remote_command(sampler_args)]


def node_agent(namespace: str = NAMESPACE, image: str = IMAGE, all_nodes: bool = False) -> list[Manifest]:
    """towel's way, least privilege: hostPID to see every container's processes, only
    SYS_PTRACE, no privileged mode, the runtime's default seccomp profile, a read-only root
    file system; its own namespace; exec into it only for those bound to the role
    (`kubectl create rolebinding ... --role=sampler-exec --user=NAME`). Worker nodes only,
    unless ``all_nodes`` (control-plane nodes too: every taint tolerated)."""
    labels = {"app": AGENT}
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": AGENT, "namespace": namespace},
         "automountServiceAccountToken": False},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "sampler-exec", "namespace": namespace},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                   {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}]},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": AGENT, "namespace": namespace},
         "spec": {"selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": agent_pod_spec(image, all_nodes)}}},
    ]


CONTROL_PLANE = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
"""The labels of control-plane nodes (the second before Kubernetes 1.24)."""
WRITABLE = {"/run": "run", "/tmp": "tmp"}
"""What the agent writes (the journal of patched bytes in /run/sampler, --out files), on
emptyDir volumes under its read-only root. /run, not /run/sampler: an emptyDir is writable
by all (mode 0777), and sampler trusts a journal folder only when it made it, mode 0700."""


def agent_pod_spec(image: str = IMAGE, all_nodes: bool = False) -> Manifest:
    spec: Manifest = {
        "hostPID": True,
        "serviceAccountName": AGENT,
        "automountServiceAccountToken": False,
        "containers": [{
            "name": "sampler", "image": image, "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"],
            "securityContext": {**ONLY_PTRACE, "readOnlyRootFilesystem": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
            "volumeMounts": [{"name": name, "mountPath": path} for path, name in WRITABLE.items()],
        }],
        "volumes": [{"name": name, "emptyDir": {}} for name in WRITABLE.values()],
    }
    spec["tolerations"] = [{"operator": "Exists"}]  # tainted worker pools (GPU, dedicated) too
    if not all_nodes:  # not on control-plane nodes: they hold the cluster's keys
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": label, "operator": "DoesNotExist"}
                                                        for label in CONTROL_PLANE]}]}}}
    return spec


def agent_pod(name: str, image: str = IMAGE, command: list[str] | None = None,
              volumes: dict[str, str] | None = None) -> Manifest:
    """The DaemonSet's pod on its own (for one node, or to play without a cluster)."""
    spec = agent_pod_spec(image)
    spec.pop("serviceAccountName")
    if command is not None:
        spec["containers"][0]["command"] = command
        spec["restartPolicy"] = "Never"
    _mount(spec["containers"][0], spec, volumes or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": AGENT}}, "spec": spec}


def shared_pod(name: str, target_image: str, target_command: list[str], sampler_args: list[str],
               image: str = IMAGE, volumes: dict[str, str] | None = None, capability: bool = True) -> Manifest:
    """A target and sampler in one pod, one process namespace: what `kubectl debug
    --target` gives, as a Pod. ``volumes``: host folder -> mount path, in both containers."""
    if "--wait-target" not in sampler_args and {"--pgrep", "--container"} & set(sampler_args):
        sampler_args = [*sampler_args, "--wait-target", "30s"]  # the containers start together
    sampler = {"name": "sampler", "image": image, "command": [SAMPLER, *sampler_args],
               "securityContext": dict(ONLY_PTRACE) if capability else
               {"capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": False}}
    target = {"name": "target", "image": target_image, "command": target_command}
    spec: Manifest = {"shareProcessNamespace": True, "restartPolicy": "Never", "containers": [target, sampler]}
    for container in (target, sampler):
        _mount(container, spec, volumes or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _mount(container: Manifest, spec: Manifest, volumes: dict[str, str]) -> None:
    for index, (host, path) in enumerate(sorted(volumes.items())):
        name = f"v{index}"
        container.setdefault("volumeMounts", []).append({"name": name, "mountPath": path})
        existing = spec.setdefault("volumes", [])
        if not any(v["name"] == name for v in existing):
            existing.append({"name": name, "hostPath": {"path": host, "type": "Directory"}})
