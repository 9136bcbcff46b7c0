#!/usr/bin/env bash
# The whole suite: set-up on a fresh machine, type check, lint, unit and golden tests, and (as root)
# the kernel tests in throwaway network namespaces and the IPVS tests in a qemu VM.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(nft:nftables iptables:iptables conntrack:conntrack ip:iproute2 socat:socat ruby:ruby)
if [ "$(id -u)" = 0 ]; then
  need=()
  for d in "${debs[@]}"; do command -v "${d%%:*}" >/dev/null || need+=("${d#*:}"); done
  if [ ${#need[@]} -gt 0 ]; then
    echo "test: installing Debian packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
else
  echo "test: NOT ROOT: kernel tests (nftables, iptables, IPVS, netns lab) will be SKIPPED" >&2
fi

# npm ci when node_modules is missing or older than the lockfile.
if [ ! -x node_modules/.bin/node ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
export PATH="$PWD/node_modules/.bin:$PATH"

echo "test: node $(node --version), $(tsc --version)"
tsc -p tsconfig.json
biome check .
exec node --test --test-reporter=spec --test-timeout=600000 "test/**/*.test.ts"
