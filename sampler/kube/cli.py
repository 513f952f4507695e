"""`kubectl sampler` (the executable kubectl-sampler, found by kubectl as a plug-in)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import click

from sampler import notice
from sampler.errors import SamplerError, UsageError
from sampler.kube import kubectl, manifests, preflight, yaml
from sampler.output.csv import OutFile


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """sampler next to a pod: in an ephemeral debug container (only SYS_PTRACE), or through
    the node agent (--node; kubectl sampler install)."""


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("pod")
@click.option("-n", "--namespace", help="The pod's namespace.")
@click.option("-c", "--container", help="The container to sample (default: the pod's first).")
@click.option("--image", default=manifests.IMAGE, show_default=True, help="sampler's image.")
@click.option("--node", "node_mode", is_flag=True,
              help="Through the node agent (a DaemonSet: kubectl sampler install), for clusters without "
                   "ephemeral containers or whose Pod Security rejects SYS_PTRACE in the namespace.")
@click.option("--out", default="-", show_default=True, help="Where the rows go on this machine.")
@click.option("--dry-run", is_flag=True, help="Print the kubectl command instead of running it.")
@click.argument("sampler_args", nargs=-1, type=click.UNPROCESSED)
def attach(pod: str, namespace: str | None, container: str | None, image: str, node_mode: bool, out: str,
           dry_run: bool, sampler_args: Sequence[str]) -> int:
    """Run `sampler attach` next to POD; its rows come back to --out, its lines to stderr.

    \b
    Examples:
      kubectl sampler attach web-0 -c app -- --expr 'w-r' --interval 1s --count 60
      kubectl sampler attach web-0 --node --out rows.csv -- --pgrep server \\
          --at 'main.(*Ring).Read' --expr 'delta=b.w-b.r'
      kubectl sampler attach web-0 --node -- --all --at handle --expr n   # every process of the container
    """
    args = remote_args(list(sampler_args))
    if dry_run:
        argv = manifests.debug_command(pod, namespace, container, image, with_default_target(args)) if not node_mode \
            else ["kubectl", "exec", "-i", "-n", manifests.NAMESPACE, "AGENT-POD-ON-THAT-NODE", "--",
                  *manifests.remote_command([*args, "--container", "CONTAINER-ID"])]
        click.echo(shlex.join(argv))
        return 0
    pod_json = kubectl.get("pod", pod, *(["-n", namespace] if namespace else []))
    ns = pod_json.get("metadata", {}).get("namespace", namespace or "default")
    why = preflight.blocker(pod_json, kubectl.get("namespace", ns), None if node_mode else kubectl.server_version(),
                            container, node_mode)
    if why is not None:
        raise UsageError(why)
    if node_mode:
        argv = node_command(pod_json, container, args)
    else:
        argv = manifests.debug_command(pod, ns, container, image, with_default_target(args))
    with _output(out) as stream:
        return kubectl.stream(argv, stream)


def remote_args(args: list[str]) -> list[str]:
    """The user's sampler options, with the rows sent back over the stream."""
    if args[:1] == ["attach"]:
        args = args[1:]
    if "--out" in args:
        raise UsageError("give --out before '--' (the rows come back to this machine)",
                         "kubectl sampler attach POD --out rows.csv -- --expr ...")
    return ["attach", *args, "--out", "-"]


def with_default_target(args: list[str]) -> list[str]:
    """In the target container's process namespace its entrypoint is PID 1; with --all and no
    other target, every process there (sampler's own excepted)."""
    if not {"--pid", "--pgrep", "--container", "--exe"} & set(args):
        return [*args, "--pgrep", "."] if "--all" in args else [*args, "--pid", "1"]
    return args


def node_command(pod_json: dict[str, object], container: str | None, args: list[str]) -> list[str]:
    """pod -> node -> the agent's pod there; container -> its runtime ID, which the agent
    (with the host's PIDs) finds through /proc/*/cgroup."""
    spec = pod_json.get("spec", {})
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    identifier = preflight.container_id(pod_json, container)
    if not node or not identifier:
        raise UsageError("the pod has no node or container ID yet (is it running?)")
    agents = kubectl.get("pods", "-n", manifests.NAMESPACE, "-l", f"app={manifests.AGENT}",
                         "--field-selector", f"spec.nodeName={node}")
    names = [item["metadata"]["name"] for item in agents.get("items", [])]
    if not names:
        raise UsageError(f"no sampler agent runs on node {node}", "kubectl sampler install")
    return ["kubectl", "exec", "-i", "-n", manifests.NAMESPACE, names[0], "--",
            *manifests.remote_command([*args, "--container", identifier])]


@cli.command()
@click.option("--image", default=manifests.IMAGE, show_default=True)
@click.option("--namespace", default=manifests.NAMESPACE, show_default=True)
@click.option("--all-nodes", is_flag=True, help="Control-plane nodes too (by default worker nodes only).")
@click.option("--dry-run", is_flag=True, help="Print the manifests instead of applying them.")
def install(image: str, namespace: str, all_nodes: bool, dry_run: bool) -> int:
    """Apply the node agent: its namespace, RBAC and DaemonSet (hostPID, only SYS_PTRACE,
    RuntimeDefault seccomp, read-only root; worker nodes only unless --all-nodes)."""
    text = yaml.dump(manifests.node_agent(namespace, image, all_nodes))
    if dry_run:
        click.echo(text, nl=False)
    else:
        kubectl.apply(text)
    return 0


@cli.command()
@click.option("--namespace", default=manifests.NAMESPACE, show_default=True)
def uninstall(namespace: str) -> int:
    """Delete what install applied."""
    kubectl.apply(yaml.dump(manifests.node_agent(namespace)), delete=True)
    return 0


@cli.group()
def manifest() -> None:
    """Print what would be applied, for review (no cluster needed)."""


@manifest.command("agent")
@click.option("--image", default=manifests.IMAGE, show_default=True)
@click.option("--namespace", default=manifests.NAMESPACE, show_default=True)
@click.option("--pod", "as_pod", metavar="NAME", help="One pod of the agent instead of the DaemonSet and RBAC.")
@click.option("--volume", "volumes", multiple=True, metavar="HOST:PATH", help="A host folder to mount (--pod).")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of YAML.")
@click.option("--all-nodes", is_flag=True, help="Control-plane nodes too (by default worker nodes only).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def manifest_agent(image: str, namespace: str, as_pod: str | None, volumes: Sequence[str], as_json: bool,
                   all_nodes: bool, command: Sequence[str]) -> int:
    """The node agent (kubectl sampler install applies it); with --pod, one pod of it
    running COMMAND."""
    docs = [manifests.agent_pod(as_pod, image, list(command) or None, _volumes(volumes))] if as_pod else \
        manifests.node_agent(namespace, image, all_nodes)
    _print(docs, as_json)
    return 0


@manifest.command("shared")
@click.option("--name", default="sampler-shared", show_default=True)
@click.option("--image", default=manifests.IMAGE, show_default=True)
@click.option("--target-image", required=True)
@click.option("--target-command", required=True, help="The target's command line (split on spaces).")
@click.option("--volume", "volumes", multiple=True, metavar="HOST:PATH", help="A host folder to mount in both.")
@click.option("--without-ptrace", is_flag=True, help="Drop every capability, SYS_PTRACE included.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of YAML.")
@click.argument("sampler_args", nargs=-1, type=click.UNPROCESSED)
def manifest_shared(name: str, image: str, target_image: str, target_command: str, volumes: Sequence[str],
                    without_ptrace: bool, as_json: bool, sampler_args: Sequence[str]) -> int:
    """A Pod with a target and sampler sharing one process namespace (what the ephemeral
    container amounts to): sampler's options after '--'."""
    args = list(sampler_args)
    doc = manifests.shared_pod(name, target_image, target_command.split(), ["attach", *args] if args[:1] !=
                               ["attach"] else args, image, _volumes(volumes), capability=not without_ptrace)
    _print([doc], as_json)
    return 0


def _print(docs: list[manifests.Manifest], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List", "items": docs},
                              indent=2))
    else:
        click.echo(yaml.dump(docs), nl=False)


def _volumes(pairs: Sequence[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        host, _, path = pair.partition(":")
        if not host or not path:
            raise UsageError(f"--volume {pair}: give HOST:PATH")
        found[host] = path
    return found


@contextlib.contextmanager
def _output(path: str) -> Iterator[BinaryIO]:
    """Where the streamed rows go: stdout, or the file --out names."""
    if path == "-":
        yield sys.stdout.buffer
        return
    out = OutFile(path)  # the one way sampler writes a file: never through a link or into another's file
    try:
        if stat.S_ISREG(os.fstat(out.fd).st_mode):
            os.ftruncate(out.fd, 0)
        with os.fdopen(out.fd, "wb", closefd=False) as stream:
            yield stream
    finally:
        out.close(begun=True)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="kubectl sampler",
                          standalone_mode=False)
    except SamplerError as e:
        notice.say(str(e))
        return e.exit_code
    except click.ClickException as e:
        notice.say(f"{e.format_message()} (see 'kubectl sampler --help')")
        return e.exit_code
    except (click.Abort, KeyboardInterrupt):
        return 130
    return result if isinstance(result, int) else 0


def entry() -> None:
    sys.exit(main())
