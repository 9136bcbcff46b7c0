#!/usr/bin/env bash
# The whole suite: set-up on a fresh machine, type check, lint, unit and golden tests (shellcheck and
# `vagrant validate` among them), and (as root) the kernel tests in throwaway network namespaces and
# the IPVS tests in a qemu VM, the unit under systemd in a Debian root made by mmdebstrap (systemd-nspawn),
# and the container image run by runc.
set -euo pipefail
cd "$(dirname "$0")/.."

# what-shows-it-is-installed:package; the first part is a command, or a file for a plugin.
# kubectl: Debian 12's kubernetes-client is 1.20.2 (1.20.5+really1.20.2-1.1+deb12u1); the stand-in API
# server's kubectl test runs whichever kubectl is on PATH.
debs=(nft:nftables iptables:iptables conntrack:conntrack nfacct:nfacct ip:iproute2 ipset:ipset
  socat:socat ruby:ruby shellcheck:shellcheck vagrant:vagrant kubectl:kubernetes-client
  /usr/share/vagrant-plugins/plugins.d/vagrant-libvirt.json:vagrant-libvirt
  mmdebstrap:mmdebstrap systemd-nspawn:systemd-container lintian:lintian umoci:umoci runc:runc)
if [ "$(id -u)" = 0 ]; then
  installed() { if [[ "$1" == /* ]]; then [ -e "$1" ]; else command -v "$1" >/dev/null; fi; }
  need=()
  for d in "${debs[@]}"; do installed "${d%%:*}" || need+=("${d#*:}"); done
  if [ ${#need[@]} -gt 0 ]; then
    echo "test: installing Debian packages: ${need[*]}"
    # A fresh machine's own apt run (unattended upgrades) can hold the lock: wait for it, not fail.
    apt=(apt-get -o DPkg::Lock::Timeout=600)
    "${apt[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
else
  echo "test: NOT ROOT: kernel tests (nftables, iptables, IPVS, netns lab) will be SKIPPED" >&2
fi

# npm ci when node_modules is missing or older than the lockfile.
if [ ! -x node_modules/.bin/node ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
export PATH="$PWD/node_modules/.bin:$PATH"
# One compile cache for every node process of the run (~200 test files, and the daemons, servers and
# CLIs they start): each loads the same modules, stripped of their types and compiled once for all
# instead of once a process (30% less CPU over test/cli, test/model and test/sources). npm ci empties
# it; the VM's guests keep their own (harness/vm.ts).
export NODE_COMPILE_CACHE="$PWD/node_modules/.cache/node-compile-cache"

echo "test: node $(node --version), $(tsc --version)"

# Two lanes. The slowest files mostly wait: on the qemu VM's emulated CPUs (all the IPVS kernel
# tests, one boot, two groups of files at once on two vCPUs: the long pole, ~15-20 min; while the
# rest runs, the VM's autogroup gets about one core whatever its vCPUs, and once the rest is done
# both), on the network and disk (mmdebstrap: the systemd
# tests' root and the image's base, unless kept from a run in the last week), or on the clock
# (ten-idle-minutes: three idle daemons for 10 minutes, ~12 min).
# They run together beside the rest (two files at a time, below), not
# after it; their report comes at the end. All of them start at once: node starts a lane's files in
# path order, so with fewer slots than files test/in-vm.test.ts started last, ~4 min late.
# health-idle waits on the clock too (~30 s of three health timeouts), with no kernel state.
# The lane beside starts before the type check and lint (~15 s at load 9), which the rest waits for.
aside=(test/in-vm.test.ts test/daemon/systemd-boot.test.ts test/daemon/ten-idle-minutes.test.ts
  test/daemon/deb-package.test.ts test/daemon/image.test.ts test/daemon/health-idle.test.ts)
mapfile -t rest < <(find test -name '*.test.ts' | sort | grep -vxF -f <(printf '%s\n' "${aside[@]}"))
run_tests=(node --test --test-reporter=spec --test-timeout=600000)
aside_log=$(mktemp)
# In a process group of its own (setsid runs node as itself: $! is node's PID, the group's), so the
# trap below stops the whole lane, the VM's qemu and the machines included, if this script ends
# early (a type error, a lint finding).
setsid -w "${run_tests[@]}" --test-concurrency="${#aside[@]}" "${aside[@]}" >"$aside_log" 2>&1 &
aside_pid=$!
trap 'kill -- -"$aside_pid" 2>/dev/null || kill "$aside_pid" 2>/dev/null || true; rm -f "$aside_log"' EXIT
echo "test: ${aside[*]} started beside the rest (reported at the end)"
tsc -p tsconfig.json
biome check .
echo "test: ${#rest[@]} files here"
# Two of them at a time, not node's default of one on 2 cores. One file is mostly one thread at a
# time (the test, then the child it waits for: node starts of ~1 s a file, iptables, nft, `ip netns
# exec`), and it waits on clocks (drops called after their timeout, sync periods, health timeouts);
# once the VM above is done a core is idle. This lane is one autogroup, the lane above another
# (setsid): while the VM runs, the two files share this lane's part of the CPU, not the VM's.
# Every deadline the tests set is made for the design load, CPU hogs beside npm test's own
# processes, and stretched above it (harness/emulation.ts); the files share nothing but the host:
# each lab's namespaces carry its PID, servers listen on free ports or inside a lab's namespace,
# and the xtables lock is waited for (IPTABLES_WAIT).
status=0
"${run_tests[@]}" --test-concurrency=2 "${rest[@]}" || status=$?
aside_status=0
wait "$aside_pid" || aside_status=$?
echo
echo "test: ${aside[*]}:"
cat "$aside_log"
if [ "$status" -ne 0 ] || [ "$aside_status" -ne 0 ]; then
  echo "test: FAILED (exit $status here, $aside_status beside)" >&2
  exit 1
fi
