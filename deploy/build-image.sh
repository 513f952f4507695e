#!/usr/bin/env bash
# make image: build sampler's image with podman (or docker), tagged with the version.
# BASE_IMAGE overrides the base (default: Debian 12 slim). With no registry reachable,
# SAMPLER_LOCAL_BASE=1 makes the base from Debian's packages first (deploy/local-base.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(.venv/bin/python -c 'import sampler; print(sampler.__version__)')
engine=${ENGINE:-$(command -v podman || command -v docker || true)}
[ -n "$engine" ] || { echo "make image: neither podman nor docker is installed (apt-get install podman runc)" >&2; exit 1; }
runtime=()
[ "$(basename "$engine")" = podman ] && runtime=(--runtime runc)
if [ "${SAMPLER_LOCAL_BASE:-}" = 1 ] && [ -z "${BASE_IMAGE:-}" ]; then
  bash deploy/local-base.sh
  BASE_IMAGE=localhost/sampler-base:bookworm
fi
rm -rf deploy/wheels && mkdir -p deploy/wheels
.venv/bin/python -m pip wheel -q --no-deps -w deploy/wheels .
.venv/bin/python -m pip wheel -q -w deploy/wheels capstone click pexpect prometheus-client pyelftools python-ptrace
"$engine" "${runtime[@]}" build -q -f deploy/Containerfile ${BASE_IMAGE:+--build-arg BASE_IMAGE="$BASE_IMAGE"} \
  -t "localhost/sampler:$version" deploy
echo "make image: localhost/sampler:$version"
