#!/usr/bin/env bash
# `scripts/image.sh DEB [OUTDIR]` (root): OUTDIR (dist/) gets kproxy_<version>_amd64.oci.tar, an OCI
# image layout of one layer built without a registry: a Debian 12 minbase root made by mmdebstrap
# with the package installed by apt (its dependencies from the Debian mirror, kproxy from DEB),
# turned into the image by umoci. Its entrypoint is the package's /usr/sbin/kproxy; the DaemonSet
# (deploy/daemonset.yaml) gives the command. Load it with
# `ctr -n k8s.io images import --base-name localhost/kproxy kproxy_*.oci.tar` or `podman load`.
set -euo pipefail
deb=$(realpath "$1")
out=$(realpath -m "${2:-dist}")
version=$(dpkg-deb -f "$deb" Version)
tag=${version//+/_} # OCI tags have no "+"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# No systemd, no documentation: a container's root runs one process. The .deb goes in by a hook,
# installed by the root's own apt: given to mmdebstrap's --include, dpkg (chrooted) cannot see
# the path apt hands it.
name=$(basename "$deb")
mmdebstrap --mode=root --variant=minbase --dpkgopt=force-unsafe-io \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="copy-in $deb /var/tmp" \
  --customize-hook="chroot \"\$1\" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /var/tmp/$name" \
  --customize-hook="rm -rf \"\$1\"/var/tmp/$name \"\$1\"/var/lib/apt/lists/*" \
  bookworm "$work/root" http://deb.debian.org/debian

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
