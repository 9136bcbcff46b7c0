#!/usr/bin/env bash
# Runs the lab's scenario checks against the Vagrant VMs (after `vagrant up`), once per mode, and
# prints the comparison table: the same checks `npm run lab` runs against network namespaces.
#   vagrant/run-scenarios.sh [nftables,iptables,ipvs]     (default: nftables,iptables)
# Needs on this machine: vagrant, ssh, and the checkout's Node 24 (npm ci in the checkout).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
modes="${1:-nftables,iptables}"
node="$repo/node_modules/.bin/node"
if [[ ! -x "$node" ]]; then
  echo "run-scenarios: $node is missing; run npm ci in $repo first" >&2
  exit 2
fi
# The VMs run the checkout's echo tools: bring their copy up to date.
(cd "$here" && vagrant rsync)
exec "$node" "$repo/lab/main.ts" --lab vagrant --vagrant-dir "$here" --modes "$modes"
