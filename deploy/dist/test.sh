#!/usr/bin/env bash
# make dist-test: what make dist made, on hosts that have nothing of sampler's (podman, no network):
#   the single file in bare Debian 11 and Debian 12 (debootstrap minbase: no python3, gcc or Go),
#   the wheel installed from a folder into Debian 11's own python3.9, with pip and with pipx;
# each samples, traces, repairs and reports on a target built here (static, deploy/dist/inside.sh).
# Then the start-up of the single file against the venv's, on this host (bench/startup.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
P=(podman --runtime runc)
bash deploy/dist/images.sh
wheel=$(ls dist/debug_sampler-*.whl)
run() {  # image, how sampler is started there, and the set-up before it
  local image=$1 how=$2 setup=${3:-true}
  echo "dist-test: $image: $how" >&2
  # no seccomp filter, as a host's processes mostly run: a target with one gets int3s, not in-process probes
  "${P[@]}" run --rm --network none --cap-add SYS_PTRACE --security-opt seccomp=unconfined \
    -v "$PWD/dist":/dist:ro -v "$PWD/build/dist/wheels":/wheels:ro \
    -v "$PWD/targets/bin/ringbuf-c-static":/t/ringbuf-c-static:ro -v "$PWD/deploy/dist/inside.sh":/t/inside.sh:ro \
    "$image" /bin/sh -euc "$setup; /bin/sh /t/inside.sh '$how'"
}
run localhost/sampler-bare:bullseye /dist/sampler
run localhost/sampler-bare:bookworm /dist/sampler
run localhost/sampler-py:bullseye /venv/bin/sampler \
  "export WITH_PYTHON=1; python3 --version; python3 -m venv /venv; /venv/bin/pip install -q --no-index --find-links /wheels /dist/$(basename "$wheel")"
run localhost/sampler-py:bullseye /usr/local/bin/sampler \
  "export WITH_PYTHON=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels PIPX_HOME=/opt/pipx PIPX_BIN_DIR=/usr/local/bin
   python3 -m venv /pipx; /pipx/bin/pip install -q pipx; /pipx/bin/pipx install /dist/$(basename "$wheel") >/tmp/pipx.log 2>&1 || { cat /tmp/pipx.log; exit 1; }"
# (CI's short form, DIST_BENCH=0, leaves the bench out: a figure, not a test)
[ "${DIST_BENCH:-1}" = 0 ] || .venv/bin/python bench/startup.py ${STARTUP_RUNS:+--runs "$STARTUP_RUNS"}
echo "dist-test: all passed"
