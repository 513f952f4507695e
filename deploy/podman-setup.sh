#!/usr/bin/env bash
# make kube-test's set-up: podman, runc and debootstrap from Debian's packages when missing,
# and a containers.conf where there is none (the default ulimits fail on these machines;
# runc, as crun fails here).
set -euo pipefail
need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "podman-setup: missing ${need[*]}; run as root or: apt-get install ${need[*]}" >&2
    exit 1
  fi
  echo "podman-setup: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ! -e /etc/containers/containers.conf ] && [ "$(id -u)" = 0 ]; then
  mkdir -p /etc/containers
  printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' > /etc/containers/containers.conf
  echo "podman-setup: wrote /etc/containers/containers.conf (no default ulimits; runc)" >&2
fi
# podman that cannot run here fails now, in one line, rather than as a test's traceback
said=$(podman --runtime runc info 2>&1 >/dev/null) \
  || { echo "podman-setup: podman cannot run on this machine: $(echo "$said" | grep -v '^$' | tail -1)" >&2; exit 1; }
