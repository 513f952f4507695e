#!/usr/bin/env bash
# A Debian 12 base image made from Debian's packages, for machines that reach no image registry
# (make image with SAMPLER_LOCAL_BASE=1, make kube-test): debootstrap minbase bookworm, the same as
# make dist-test's bare Debian 12, which is taken when it is there. Done once.
set -euo pipefail
cd "$(dirname "$0")"
image=localhost/sampler-base:bookworm
P=(podman --runtime runc)
"${P[@]}" image exists "$image" && exit 0
if "${P[@]}" image exists localhost/sampler-bare:bookworm; then
  "${P[@]}" tag localhost/sampler-bare:bookworm "$image"
else
  bash debootstrap-image.sh "$image" bookworm
fi
echo "local-base: $image"
