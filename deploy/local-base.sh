#!/usr/bin/env bash
# A Debian 12 base image made from Debian's packages, for machines that reach no image
# registry: debootstrap --variant=minbase bookworm into a folder, then podman import
# (an imported root file system has no PATH in its config: set here). Done once.
set -euo pipefail
image=localhost/sampler-base:bookworm
podman --runtime runc image exists "$image" && exit 0
dir=$(mktemp -d /var/tmp/sampler-base.XXXXXX)
trap 'rm -rf "$dir"' EXIT
debootstrap --variant=minbase bookworm "$dir" http://deb.debian.org/debian >/dev/null
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
tar -C "$dir" -c . | podman --runtime runc import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$image" >/dev/null
echo "local-base: $image"
