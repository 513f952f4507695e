#!/usr/bin/env bash
# make dist: what to carry onto a host, in dist/:
#   debug_sampler-VERSION-py3-none-any.whl  the wheel (pip install it; Python 3.9 and up)
#   sampler                                 the single file: x86-64 Linux, glibc 2.31 and up, no Python
#   SHA256SUMS
# The single file is made by PyInstaller (--onefile) in a Debian 11 container (localhost/sampler-py:bullseye,
# made here from Debian's packages), with Debian 11's python3.9: its glibc (2.31) is the oldest the
# file needs. Everything the container installs comes from wheels downloaded here (build/dist/wheels):
# the container has no network.
set -euo pipefail
cd "$(dirname "$0")/../.."
P=(podman --runtime runc)
commit=$(git describe --always --dirty 2>/dev/null || echo "")
bash deploy/dist/images.sh
rm -rf dist build/dist && mkdir -p dist build/dist/wheels build/dist/out
trap 'rm -f sampler/_commit.txt' EXIT
echo "$commit" > sampler/_commit.txt  # --version of an install that is no checkout names its commit
.venv/bin/python -m pip wheel -q --no-deps -w dist .
wheel=$(ls dist/debug_sampler-*.whl)
# the wheels of sampler's packages, of PyInstaller and of pipx (make dist-test installs with it too),
# for Python 3.9 on x86-64 Linux (pip download judges markers by its own Python: importlib-metadata,
# PyInstaller's on 3.9, and tomli, pipx's, are named here; pip: pipx upgrades its own)
.venv/bin/python -m pip download -q -d build/dist/wheels --only-binary=:all: --python-version 3.9 \
  --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  "$wheel" pyinstaller importlib-metadata pipx tomli pip > build/dist/download.log 2>&1 \
  || { grep -v "^WARNING: Location" build/dist/download.log >&2; exit 1; }
"${P[@]}" run --rm --network none -v "$PWD":/src:ro -v "$PWD/build/dist":/build localhost/sampler-py:bullseye \
  /bin/bash -euc '
    python3 -m venv /venv
    /venv/bin/pip install -q --no-index --find-links /build/wheels /src/'"$wheel"' pyinstaller
    cd /tmp
    /venv/bin/pyinstaller --log-level WARN --onefile --strip --name sampler --collect-submodules sampler \
      --collect-data sampler --collect-binaries capstone --exclude-module tkinter \
      --distpath /build/out --workpath /tmp/work --specpath /tmp /src/deploy/dist/entry.py
    # the newest glibc symbol that anything in the file asks for
    so=$(find /venv/lib/python3.9/site-packages/capstone /usr/lib/python3.9/lib-dynload -name "*.so*")
    objdump -T /build/out/sampler /usr/lib/x86_64-linux-gnu/libpython3.9.so.1.0 $so 2>/dev/null \
      | grep -o "GLIBC_[0-9.]*" | sort -uV | tail -1 > /build/out/glibc
  '
cp build/dist/out/sampler dist/sampler
(cd dist && sha256sum -- * > SHA256SUMS)
echo "make dist: $(cd dist && ls | tr '\n' ' ')"
echo "make dist: dist/sampler is $(du -h dist/sampler | cut -f1), needs $(cat build/dist/out/glibc) or newer"
cat dist/SHA256SUMS
