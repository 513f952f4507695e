"""Before `kubectl sampler attach`: what in the cluster would stop sampler, named in one
line, from the pod's, its namespace's and the server's JSON (as kubectl prints them)."""

from __future__ import annotations

from typing import Any


def blocker(pod: dict[str, Any], namespace: dict[str, Any], server: dict[str, Any] | None,
            container: str | None, node_mode: bool) -> str | None:
    """The first thing that stops sampler from tracing ``container`` of ``pod``, or None."""
    name = pod.get("metadata", {}).get("name", "?")
    spec, status = pod.get("spec", {}), pod.get("status", {})
    if status.get("phase") not in (None, "Running"):
        return f"pod {name} is {status.get('phase')}, not Running: there is no process to sample"
    containers = [c.get("name") for c in spec.get("containers", [])]
    if container is not None and container not in containers:
        return f"pod {name} has no container {container!r} (it has {', '.join(map(str, containers))})"
    if not node_mode:
        minor = _minor(server)
        if minor is not None and minor < 23:
            return (f"the cluster runs Kubernetes 1.{minor}, which has no ephemeral containers (1.23+): "
                    "use --node (kubectl sampler install)")
        labels = namespace.get("metadata", {}).get("labels", {})
        level = labels.get("pod-security.kubernetes.io/enforce")
        ns = namespace.get("metadata", {}).get("name", "?")
        if level in ("baseline", "restricted"):
            return (f"namespace {ns} enforces Pod Security level {level!r}, which rejects a container that adds "
                    "SYS_PTRACE: use --node, or ask for the namespace's level to be 'privileged'")
        security = spec.get("securityContext", {})
        if security.get("runAsNonRoot") or security.get("runAsUser", 0) != 0:
            return (f"pod {name} runs its containers as non-root (securityContext: runAsNonRoot or runAsUser), "
                    "so the debug container would too, and a non-root process gets no SYS_PTRACE from a "
                    "profile: use --node")
    return None


def _minor(server: dict[str, Any] | None) -> int | None:
    if not server:
        return None
    info = server.get("serverVersion", server)
    try:
        return int(str(info.get("minor", "")).rstrip("+"))
    except ValueError:
        return None


def container_id(pod: dict[str, Any], container: str | None) -> str:
    """The runtime's ID of the container (containerd://ID -> ID), for the node agent."""
    statuses = pod.get("status", {}).get("containerStatuses", [])
    for status in statuses:
        if container is None or status.get("name") == container:
            found = str(status.get("containerID", ""))
            return found.split("://", 1)[-1]
    return ""
