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
# the image's Python: Debian 12's python3 (another base with another Python: IMAGE_PYTHON=3.N)
python=${IMAGE_PYTHON:-3.11}
rm -rf deploy/wheels && mkdir -p deploy/wheels
.venv/bin/python -m pip wheel -q --no-deps -w deploy/wheels .
wheel=$(ls deploy/wheels/debug_sampler-*.whl)
# the wheel's own declared dependencies, resolved from its metadata for the image's Python: no second
# list to drift (numpy came with the in-process probes and never reached the hand-made one)
.venv/bin/python -m pip download -q -d deploy/wheels --only-binary=:all: --python-version "$python" \
  --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 "$wheel" \
  > deploy/wheels/download.log 2>&1 || { grep -v "^WARNING: Location" deploy/wheels/download.log >&2; rm -f deploy/wheels/download.log; exit 1; }
rm -f deploy/wheels/download.log
"$engine" "${runtime[@]}" build -q -f deploy/Containerfile ${BASE_IMAGE:+--build-arg BASE_IMAGE="$BASE_IMAGE"} \
  -t "localhost/sampler:$version" deploy
echo "make image: localhost/sampler:$version"
