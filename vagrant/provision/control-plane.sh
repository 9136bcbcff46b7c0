#!/usr/bin/env bash
# The control plane: kubeadm init WITHOUT kube-proxy (kproxy replaces it), a static token for
# kproxy (user "kproxy", bound to kube-proxy's ClusterRole system:node-proxier), and kubectl for
# the vagrant user.
# Env: NODE_IP
set -euo pipefail
: "${NODE_IP:?}"
# shellcheck source=lab.env
source /kproxy/vagrant/provision/lab.env

if [[ ! -f /etc/kubernetes/admin.conf ]]; then
  mkdir -p /etc/kubernetes/kproxy-lab
  echo "${KPROXY_TOKEN},kproxy,kproxy" >/etc/kubernetes/kproxy-lab/tokens.csv
  chmod 600 /etc/kubernetes/kproxy-lab/tokens.csv
  cat >/etc/kubernetes/kproxy-lab/kubeadm.yaml <<CONF
apiVersion: kubeadm.k8s.io/v1beta3
kind: InitConfiguration
bootstrapTokens:
  - token: "${BOOTSTRAP_TOKEN}"
    ttl: "0"
localAPIEndpoint:
  advertiseAddress: ${NODE_IP}
nodeRegistration:
  kubeletExtraArgs:
    node-ip: ${NODE_IP}
---
apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
networking:
  serviceSubnet: ${SERVICE_CIDR}
apiServer:
  extraArgs:
    token-auth-file: /etc/kubernetes/kproxy-lab/tokens.csv
  extraVolumes:
    - name: kproxy-lab
      hostPath: /etc/kubernetes/kproxy-lab
      mountPath: /etc/kubernetes/kproxy-lab
      readOnly: true
      pathType: DirectoryOrCreate
CONF
  kubeadm init --config /etc/kubernetes/kproxy-lab/kubeadm.yaml --skip-phases=addon/kube-proxy
fi

export KUBECONFIG=/etc/kubernetes/admin.conf
until kubectl get --raw /readyz >/dev/null 2>&1; do sleep 2; done
kubectl create clusterrolebinding kproxy-lab-node-proxier --clusterrole=system:node-proxier --user=kproxy \
  --dry-run=client -o yaml | kubectl apply -f -

install -d -o vagrant -g vagrant /home/vagrant/.kube
install -o vagrant -g vagrant -m 600 /etc/kubernetes/admin.conf /home/vagrant/.kube/config
