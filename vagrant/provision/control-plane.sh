#!/usr/bin/env bash
# The control plane: kubeadm init WITHOUT kube-proxy (kproxy replaces it), a static token for
# kproxy (user "kproxy", bound to kube-proxy's ClusterRole system:node-proxier), and kubectl for
# the vagrant user. kubeadm's configuration is v1beta4, the only one kubeadm 1.37 reads.
# Env: NODE_IP
set -euo pipefail
: "${NODE_IP:?}"
# shellcheck source=SCRIPTDIR/lab.env
source /kproxy/vagrant/provision/lab.env

if [[ ! -f /etc/kubernetes/admin.conf ]]; then
  mkdir -p /etc/kubernetes/kproxy-lab
  echo "${KPROXY_TOKEN},kproxy,kproxy" >/etc/kubernetes/kproxy-lab/tokens.csv
  chmod 600 /etc/kubernetes/kproxy-lab/tokens.csv
  # The control plane at the installed kubeadm's own patch release: unset, kubeadm would look up
  # the newest one online, which may be newer than the kubelets.
  kubernetes_version="$(kubeadm version -o short)"
  # proxy.disabled skips the kube-proxy addon and is kept in the cluster's kubeadm-config, so a
  # later `kubeadm upgrade` does not install kube-proxy either (a skipped phase would not be).
  cat >/etc/kubernetes/kproxy-lab/kubeadm.yaml <<CONF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
  - token: "${BOOTSTRAP_TOKEN}"
    ttl: "0"
localAPIEndpoint:
  advertiseAddress: ${NODE_IP}
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: ${kubernetes_version}
networking:
  serviceSubnet: ${SERVICE_CIDR}
proxy:
  disabled: true
apiServer:
  extraArgs:
    - name: token-auth-file
      value: /etc/kubernetes/kproxy-lab/tokens.csv
  extraVolumes:
    - name: kproxy-lab
      hostPath: /etc/kubernetes/kproxy-lab
      mountPath: /etc/kubernetes/kproxy-lab
      readOnly: true
      pathType: DirectoryOrCreate
CONF
  kubeadm init --config /etc/kubernetes/kproxy-lab/kubeadm.yaml
fi

export KUBECONFIG=/etc/kubernetes/admin.conf
until kubectl get --raw /readyz >/dev/null 2>&1; do sleep 2; done
kubectl create clusterrolebinding kproxy-lab-node-proxier --clusterrole=system:node-proxier --user=kproxy \
  --dry-run=client -o yaml | kubectl apply -f -

install -d -o vagrant -g vagrant /home/vagrant/.kube
install -o vagrant -g vagrant -m 600 /etc/kubernetes/admin.conf /home/vagrant/.kube/config
