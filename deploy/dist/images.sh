#!/usr/bin/env bash
# The images of make dist and make dist-test, made once from Debian's packages (no registry
# here): debootstrap --variant=minbase, then podman import.
#   localhost/sampler-py:bullseye    Debian 11 with its python3.9 (and venv, libpython, binutils):
#                                    builds the single file (its glibc is the floor) and installs the wheel
#   localhost/sampler-bare:bullseye  Debian 11 minbase: no python3, gcc or Go
#   localhost/sampler-bare:bookworm  Debian 12 minbase: the same, a newer glibc
set -euo pipefail
bash "$(dirname "$0")/../podman-setup.sh"
make_image() {  # image suite [packages]
  local image=$1 suite=$2 include=${3:-}
  podman image exists "$image" && return 0
  local dir
  dir=$(mktemp -d /var/tmp/sampler-image.XXXXXX)
  echo "dist: making $image (debootstrap $suite${include:+ with $include})" >&2
  debootstrap --variant=minbase ${include:+--include="$include"} "$suite" "$dir" http://deb.debian.org/debian >/dev/null
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" -c . | podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$image" >/dev/null
  rm -rf "$dir"
}
make_image localhost/sampler-py:bullseye bullseye python3,python3-venv,libpython3.9,binutils
make_image localhost/sampler-bare:bullseye bullseye
make_image localhost/sampler-bare:bookworm bookworm
