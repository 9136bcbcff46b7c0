// route_localnet for localhost NodePorts. kube-proxy's iptables proxier sets
// net.ipv4.conf.all.route_localnet=1 at start when it serves NodePorts on 127.0.0.1: without it
// the kernel neither routes a DNATed packet with a 127.0.0.1 source off the node nor accepts the
// reply addressed back to 127.0.0.1. The sysctl is per network namespace, written in the daemon's
// own. kube-proxy refuses to start when the write fails; kproxy skips it with a note (a read-only
// /proc/sys in a container), since every other node port address is served all the same.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type ProxyOptions, servesLocalhostNodePorts } from '../model/node-settings.ts';
import { readNumber, type SysctlAction } from './conntrack-sysctls.ts';

const ROUTE_LOCALNET = 'net/ipv4/conf/all/route_localnet';
const KEY = 'net.ipv4.conf.all.route_localnet';
const CONSEQUENCE = 'NodePorts on 127.0.0.1 will not answer';

/** Sets route_localnet when localhost NodePorts are served; what it did, or why it did not. */
export async function applyRouteLocalnet(options: ProxyOptions, procRoot: string): Promise<SysctlAction[]> {
  if (!servesLocalhostNodePorts(options)) return [];
  const path = join(procRoot, 'sys', ROUTE_LOCALNET);
  try {
    const current = await readNumber(path);
    if (current === undefined)
      return [{ key: KEY, action: 'skipped', reason: `no IPv4 here; ${CONSEQUENCE}` }];
    if (current === 1) return [];
    await writeFile(path, '1\n');
    return [{ key: KEY, action: 'set', from: current, to: 1 }];
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    return [
      { key: KEY, action: 'skipped', reason: `cannot be written here (${code ?? message}); ${CONSEQUENCE}` },
    ];
  }
}
