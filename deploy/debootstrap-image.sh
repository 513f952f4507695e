#!/usr/bin/env bash
# A Debian image made from Debian's packages, for machines that reach no image registry:
#   deploy/debootstrap-image.sh IMAGE SUITE [PACKAGE,PACKAGE...]
# debootstrap --variant=minbase SUITE into a folder (with the packages named), then podman import
# (an imported root file system has no PATH in its config: set here). Done once: an image that
# exists is kept. A failure is one line that says which step and where its log is.
set -euo pipefail
image=$1 suite=$2 include=${3:-}
P=(podman --runtime runc)
"${P[@]}" image exists "$image" && exit 0
command -v debootstrap >/dev/null || { echo "image: debootstrap is missing: bash deploy/podman-setup.sh installs it" >&2; exit 1; }
dir=$(mktemp -d /var/tmp/sampler-image.XXXXXX)
log=$(mktemp /var/tmp/sampler-debootstrap.XXXXXX.log)
trap 'rm -rf "$dir"' EXIT
echo "image: making $image (debootstrap $suite${include:+ with $include})" >&2
debootstrap --variant=minbase ${include:+--include="$include"} "$suite" "$dir" http://deb.debian.org/debian >"$log" 2>&1 \
  || { echo "image: debootstrap of Debian $suite for $image failed (is deb.debian.org reachable?): $(tail -1 "$log"); see $log" >&2; exit 1; }
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
tar -C "$dir" -c . | "${P[@]}" import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$image" >/dev/null \
  || { echo "image: podman import of $image failed" >&2; exit 1; }
rm -f "$log"
