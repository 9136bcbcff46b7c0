#!/usr/bin/env bash
# Every node: containerd and runc from their upstream release binaries, containerd's own install
# path (its docs/getting-started.md). Kubernetes 1.36 and later need containerd 2.x and Debian 13
# ships 1.7, so the distribution's package cannot serve. Each download is checked against the
# checksum file published with the release; containerd's systemd unit comes from the same tag.
# Env (from the Vagrantfile): CONTAINERD_VERSION RUNC_VERSION
set -euo pipefail
: "${CONTAINERD_VERSION:?}" "${RUNC_VERSION:?}"

# Both projects name their binaries by Debian's architecture names (amd64, arm64).
arch="$(dpkg --print-architecture)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

if [[ "$(containerd --version 2>/dev/null)" != *" v${CONTAINERD_VERSION} "* ]]; then
  release="https://github.com/containerd/containerd/releases/download/v${CONTAINERD_VERSION}"
  tarball="containerd-${CONTAINERD_VERSION}-linux-${arch}.tar.gz"
  curl -fsSL -O "${release}/${tarball}" -O "${release}/${tarball}.sha256sum"
  sha256sum --check --strict "${tarball}.sha256sum"
  tar -C /usr/local -xzf "$tarball"
  mkdir -p /usr/local/lib/systemd/system
  curl -fsSL -o /usr/local/lib/systemd/system/containerd.service \
    "https://raw.githubusercontent.com/containerd/containerd/v${CONTAINERD_VERSION}/containerd.service"
fi

if [[ "$(runc --version 2>/dev/null)" != "runc version ${RUNC_VERSION}"* ]]; then
  release="https://github.com/opencontainers/runc/releases/download/v${RUNC_VERSION}"
  curl -fsSL -O "${release}/runc.${arch}" -O "${release}/runc.sha256sum"
  # The checksum file lists every architecture: check ours, and fail if it is not listed.
  grep " \*\?runc\.${arch}\$" runc.sha256sum | sha256sum --check --strict
  install -m 755 "runc.${arch}" /usr/local/sbin/runc
fi

mkdir -p /etc/containerd
containerd config default >/etc/containerd/config.toml
# The kubelet takes its cgroup driver from containerd (the CRI RuntimeConfig call, containerd 2.x):
# systemd's, the one kubeadm and a systemd host want.
sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' /etc/containerd/config.toml
if ! grep -q 'SystemdCgroup = true' /etc/containerd/config.toml; then
  echo "containerd.sh: containerd ${CONTAINERD_VERSION}'s default configuration has no SystemdCgroup" >&2
  exit 1
fi

# containerd looks for CNI plugins in /opt/cni/bin; Debian installs its plugins in /usr/lib/cni.
# Plugins already there (pkgs.k8s.io's kubernetes-cni, when installed) are kept.
mkdir -p /opt/cni/bin
for plugin in /usr/lib/cni/*; do
  [[ -e "/opt/cni/bin/${plugin##*/}" ]] || ln -s "$plugin" /opt/cni/bin/
done

systemctl daemon-reload
systemctl enable containerd
systemctl restart containerd
