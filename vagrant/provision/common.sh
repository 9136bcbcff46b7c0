#!/usr/bin/env bash
# Every node: kernel settings, Debian's tools and CNI plugins, kubeadm/kubelet/kubectl from
# pkgs.k8s.io (K8S_MINOR's repository and signing key), a bridge CNI with this node's pod CIDR, and
# routes to the other nodes' pod CIDRs. containerd comes next, from containerd.sh.
# Env (from the Vagrantfile): NODE_NAME NODE_IP POD_CIDR POD_ROUTES K8S_MINOR
set -euo pipefail
: "${NODE_NAME:?}" "${NODE_IP:?}" "${POD_CIDR:?}" "${POD_ROUTES:?}" "${K8S_MINOR:?}"
export DEBIAN_FRONTEND=noninteractive

swapoff -a
sed -i '/\sswap\s/d' /etc/fstab

cat >/etc/modules-load.d/kproxy-lab.conf <<'CONF'
overlay
br_netfilter
CONF
modprobe overlay
modprobe br_netfilter
# Pods share a bridge: br_netfilter lets service replies between pods of one node be un-DNATed.
cat >/etc/sysctl.d/90-kproxy-lab.conf <<'CONF'
net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
CONF
sysctl --system >/dev/null

apt-get update -q
apt-get install -y -q ca-certificates curl gpg containernetworking-plugins conntrack nftables \
  iptables ipset ipvsadm socat npm

# pkgs.k8s.io has one repository per minor, each signed with its own key.
keyring=/etc/apt/keyrings/kubernetes-apt-keyring.gpg
mkdir -p /etc/apt/keyrings
curl -fsSL "https://pkgs.k8s.io/core:/stable:/${K8S_MINOR}/deb/Release.key" | gpg --batch --yes --dearmor -o "$keyring"
echo "deb [signed-by=$keyring] https://pkgs.k8s.io/core:/stable:/${K8S_MINOR}/deb/ /" \
  >/etc/apt/sources.list.d/kubernetes.list
apt-get update -q
apt-get install -y -q kubelet kubeadm kubectl
apt-mark hold kubelet kubeadm kubectl
# The kubelet's address on the lab network (not the NAT interface Vagrant adds), on every node;
# kubeadm's systemd drop-in reads this file.
echo "KUBELET_EXTRA_ARGS=--node-ip=${NODE_IP}" >/etc/default/kubelet

mkdir -p /etc/cni/net.d
cat >/etc/cni/net.d/10-kproxy-lab.conflist <<CONF
{
  "cniVersion": "1.0.0",
  "name": "kproxy-lab",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "${POD_CIDR}" }]], "routes": [{ "dst": "0.0.0.0/0" }] }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
CONF

# Routes to the other nodes' pods, re-added at every boot by a oneshot unit.
routes=""
for entry in $POD_ROUTES; do
  IFS='=' read -r name cidr via <<<"$entry"
  [[ "$name" == "$NODE_NAME" ]] && continue
  routes+="ExecStart=/usr/sbin/ip route replace ${cidr} via ${via}"$'\n'
done
cat >/etc/systemd/system/kproxy-lab-routes.service <<UNIT
[Unit]
Description=kproxy lab: routes to the other nodes' pod CIDRs
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
${routes}
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now kproxy-lab-routes.service
systemctl restart kproxy-lab-routes.service
