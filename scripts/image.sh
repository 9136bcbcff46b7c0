#!/usr/bin/env bash
# `scripts/image.sh [--base DIR] DEB [OUTDIR]` (root): OUTDIR (dist/) gets
# kproxy_<version>_amd64.oci.tar, an OCI image layout of one layer built without a registry: a
# Debian 12 minbase root made by mmdebstrap with the package installed by apt (its dependencies
# from the Debian mirror, kproxy from DEB), turned into the image by umoci. Its entrypoint is the
# package's /usr/sbin/kproxy; the DaemonSet (deploy/daemonset.yaml) gives the command. Load it with
# `ctr -n k8s.io images import --base-name localhost/kproxy kproxy_*.oci.tar` or `podman load`.
#
# `--base DIR`: a copy of DIR instead of a new root, made by `scripts/image.sh --make-base DIR DEB`
# (DEB's Depends installed too): no mirror, no download, the same image. Make it again for
# bookworm's updates (the tests keep theirs a week) or when the package's Depends change: the
# build takes the base's packages as they are, and fails if one of DEB's dependencies is missing.
set -euo pipefail

# One recipe for the image's root and a base's. No documentation: a container's root runs one
# process. mmdebstrap writes the --dpkgopt lines into the root's /etc/dpkg/dpkg.cfg.d, so the dpkg
# that installs the package into a base's copy keeps them too.
recipe=(--mode=root --dpkgopt=force-unsafe-io
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/locale/*')
suite=bookworm
mirror=http://deb.debian.org/debian
install="chroot \"\$1\" env DEBIAN_FRONTEND=noninteractive apt-get"

if [ "${1:-}" = --make-base ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --make-base DIR DEB" >&2; exit 2; }
  # DEB's dependencies, resolved by apt as installing DEB resolves them; those it installs marked
  # automatically installed, as DEB's install marks them (`satisfy` marks them manual, --mark-auto
  # or not). mmdebstrap removes the package lists and /tmp.
  depends=$(dpkg-deb -f "$3" Depends)
  manual="chroot \"\$1\" apt-mark showmanual"
  mmdebstrap "${recipe[@]}" --variant=minbase \
    --customize-hook="$manual >\"\$1\"/tmp/manual" \
    --customize-hook="$install satisfy -y -q '$depends'" \
    --customize-hook="$manual | grep -vxFf \"\$1\"/tmp/manual | xargs -r chroot \"\$1\" apt-mark auto" \
    "$suite" "$(realpath -m "$2")" "$mirror"
  exit
fi

from=(--variant=minbase)
if [ "${1:-}" = --base ]; then
  # No package of its own and no `apt-get update`: the root is the base's copy, then as below.
  from=(--variant=custom --skip=update --setup-hook="cp -a --reflink=auto \"$(realpath "$2")\"/. \"\$1\"")
  shift 2
fi
deb=$(realpath "$1")
out=$(realpath -m "${2:-dist}")
version=$(dpkg-deb -f "$deb" Version)
tag=${version//+/_} # OCI tags have no "+"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The .deb goes in by a hook, installed by the root's own apt: given to mmdebstrap's --include,
# dpkg (chrooted) cannot see the path apt hands it.
name=$(basename "$deb")
mmdebstrap "${recipe[@]}" "${from[@]}" \
  --customize-hook="copy-in $deb /var/tmp" \
  --customize-hook="$install install -y -q /var/tmp/$name" \
  --customize-hook="rm -rf \"\$1\"/var/tmp/$name \"\$1\"/var/lib/apt/lists/*" \
  "$suite" "$work/root" "$mirror"

umoci init --layout "$work/oci"
umoci new --image "$work/oci:$tag"
umoci unpack --image "$work/oci:$tag" "$work/bundle" >/dev/null
rmdir "$work/bundle/rootfs"
mv "$work/root" "$work/bundle/rootfs"
umoci repack --image "$work/oci:$tag" "$work/bundle"
umoci config --image "$work/oci:$tag" --architecture=amd64 --os=linux \
  --config.entrypoint=/usr/sbin/kproxy --config.env=TMPDIR=/tmp
umoci gc --layout "$work/oci"
mkdir -p "$out"
tar -C "$work/oci" -cf "$out/kproxy_${version}_amd64.oci.tar" .
stat -c '%n %s' "$out/kproxy_${version}_amd64.oci.tar" | awk '{ printf "%s: %.1f MiB\n", $1, $2 / 1048576 }'
