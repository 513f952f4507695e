#!/usr/bin/env bash
# The images of make dist and make dist-test, made once from Debian's packages (no registry
# here): debootstrap --variant=minbase, then podman import (deploy/debootstrap-image.sh).
#   localhost/sampler-build:bullseye  Debian 11 with its python3.9, its headers, gcc and binutils:
#                                     builds numpy without BLAS and the single file (its glibc is the floor)
#   localhost/sampler-py:bullseye     Debian 11 with its python3.9 (and venv): installs the wheel
#   localhost/sampler-bare:bullseye   Debian 11 minbase: no python3, gcc or Go
#   localhost/sampler-bare:bookworm   Debian 12 minbase: the same, a newer glibc
set -euo pipefail
cd "$(dirname "$0")/.."
bash podman-setup.sh
bash debootstrap-image.sh localhost/sampler-build:bullseye bullseye \
  python3,python3-venv,python3-dev,libpython3.9,binutils,gcc,g++
bash debootstrap-image.sh localhost/sampler-py:bullseye bullseye python3,python3-venv,libpython3.9,binutils
bash debootstrap-image.sh localhost/sampler-bare:bullseye bullseye
bash debootstrap-image.sh localhost/sampler-bare:bookworm bookworm
