#!/usr/bin/env bash
# Switches this node's kproxy to MODE: stop it, remove every rule it owns (whatever the mode was),
# set the mode in /etc/kproxy/config.yaml, start it. Used by kproxy.sh and by the lab runner.
#   sudo kproxy-mode.sh nftables|iptables|ipvs
set -euo pipefail
mode="${1:?usage: kproxy-mode.sh nftables|iptables|ipvs}"
case "$mode" in
  nftables | iptables) ;;
  ipvs) modprobe -a ip_vs ip_vs_rr dummy ;;
  *) echo "kproxy-mode.sh: unknown mode $mode (nftables, iptables, ipvs)" >&2; exit 2 ;;
esac
config=/etc/kproxy/config.yaml
systemctl stop kproxy 2>/dev/null || true
# Two dataplanes must not both hold rules.
/usr/sbin/kproxy cleanup
sed -i "s/^mode: .*/mode: ${mode}/" "$config"
systemctl enable --now kproxy
systemctl restart kproxy
