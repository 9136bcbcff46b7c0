#!/usr/bin/env bash
# kproxy on this node: Node 24 and the dependencies through npm (all of them: `kproxy install`
# compiles the app with the dev dependency TypeScript, then installs only production packages),
# `kproxy install` (app, command, systemd unit), a kubeconfig with the lab's token, the
# configuration, then the service in KPROXY_MODE (kproxy-mode.sh; the lab runner switches modes).
# Env: NODE_NAME CONTROL_PLANE_IP KPROXY_MODE
set -euo pipefail
: "${NODE_NAME:?}" "${CONTROL_PLANE_IP:?}" "${KPROXY_MODE:?}"
# shellcheck source=SCRIPTDIR/lab.env
source /kproxy/vagrant/provision/lab.env

# A private build copy: npm writes node_modules, and /kproxy is the (rsynced) checkout.
mkdir -p /opt/kproxy-build
cp -a /kproxy/. /opt/kproxy-build/
cd /opt/kproxy-build
npm ci --no-audit --no-fund
node_modules/.bin/node bin/kproxy.ts install

cat >/etc/kproxy/kubeconfig <<CONF
apiVersion: v1
kind: Config
clusters:
  - name: lab
    cluster:
      server: https://${CONTROL_PLANE_IP}:6443
      certificate-authority: /etc/kubernetes/pki/ca.crt
users:
  - name: kproxy
    user:
      token: ${KPROXY_TOKEN}
contexts:
  - name: lab
    context: { cluster: lab, user: kproxy }
current-context: lab
CONF
# Readable by the kproxy user the unit runs as (kproxy install created it), no one else.
chgrp kproxy /etc/kproxy/kubeconfig
chmod 640 /etc/kproxy/kubeconfig

cat >/etc/kproxy/config.yaml <<CONF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: ${NODE_NAME}
clusterCIDR: ${CLUSTER_CIDR}
clientConnection:
  kubeconfig: /etc/kproxy/kubeconfig
CONF

systemctl daemon-reload
bash /kproxy/vagrant/provision/kproxy-mode.sh "$KPROXY_MODE"
