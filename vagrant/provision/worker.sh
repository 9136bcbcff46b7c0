#!/usr/bin/env bash
# A worker: joins the control plane with the lab's fixed bootstrap token.
# Env: CONTROL_PLANE_IP
set -euo pipefail
: "${CONTROL_PLANE_IP:?}"
# shellcheck source=SCRIPTDIR/lab.env
source /kproxy/vagrant/provision/lab.env

if [[ ! -f /etc/kubernetes/kubelet.conf ]]; then
  # A lab shortcut: the CA is not pinned (the token is fixed and public anyway).
  kubeadm join "${CONTROL_PLANE_IP}:6443" --token "${BOOTSTRAP_TOKEN}" \
    --discovery-token-unsafe-skip-ca-verification
fi
