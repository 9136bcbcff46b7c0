// kube-proxy's start-up conntrack settings (cmd/kube-proxy/app/conntrack.go): a table large enough
// for the node's cores and the TCP/UDP timeouts of the configuration, written under /proc/sys.
// As kube-proxy does, a value is only written when it differs, and nf_conntrack_max is only ever
// raised. nf_conntrack_max is host-wide: inside a network namespace other than the host's (the
// lab's nodes) it is skipped with a note rather than failing, since it is not ours to change.
// The timeouts are per network namespace and always apply. With the max, kube-proxy sizes the
// hash table to max/4 buckets (/sys/module/nf_conntrack/parameters/hashsize, host-wide too, and
// the kernel refuses it from another namespace); it is only raised, and a read-only /sys (a
// container's) skips it with a note, as kube-proxy does.
import { readFile, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ConntrackConfig } from '../config/config.ts';

export interface SysctlEnvironment {
  /** "/proc" in the daemon; a temporary tree in tests. */
  readonly procRoot: string;
  /** "/sys" in the daemon; a temporary tree in tests (the hash size is the host's). */
  readonly sysRoot: string;
  readonly cores: number;
}

export type SysctlAction =
  | { readonly key: string; readonly action: 'set'; readonly from: number; readonly to: number }
  | { readonly key: string; readonly action: 'skipped'; readonly reason: string };

export type SysctlResult =
  | { readonly ok: true; readonly actions: readonly SysctlAction[] }
  | { readonly ok: false; readonly error: string; readonly actions: readonly SysctlAction[] };

const MAX = 'net/netfilter/nf_conntrack_max';
const HASHSIZE = 'module/nf_conntrack/parameters/hashsize';
/** How the actions name the hash size (it is a module parameter, not a sysctl). */
const HASHSIZE_KEY = 'nf_conntrack.hashsize';
/** A sysfs that will not take the write: read-only (containers), or no permission. */
const UNWRITABLE = new Set(['EROFS', 'EACCES', 'EPERM']);

/** The table size kube-proxy asks for: maxPerCore × cores, at least min; 0 = leave it alone. */
export function conntrackMax(config: ConntrackConfig, cores: number): number {
  if (config.maxPerCore === 0) return 0;
  return Math.max(config.maxPerCore * cores, config.min);
}

/** The per-namespace sysctls, in seconds; 0 = leave it alone. */
function timeoutSettings(config: ConntrackConfig): [string, number][] {
  const seconds = (ms: number) => Math.floor(ms / 1000);
  return [
    ['net/netfilter/nf_conntrack_tcp_timeout_established', seconds(config.tcpEstablishedTimeoutMs)],
    ['net/netfilter/nf_conntrack_tcp_timeout_close_wait', seconds(config.tcpCloseWaitTimeoutMs)],
    ['net/netfilter/nf_conntrack_tcp_be_liberal', config.tcpBeLiberal ? 1 : 0],
    ['net/netfilter/nf_conntrack_udp_timeout', seconds(config.udpTimeoutMs)],
    ['net/netfilter/nf_conntrack_udp_timeout_stream', seconds(config.udpStreamTimeoutMs)],
  ];
}

export async function applyConntrackSysctls(
  config: ConntrackConfig,
  env: SysctlEnvironment,
): Promise<SysctlResult> {
  const actions: SysctlAction[] = [];
  const sysctl = (key: string) => join(env.procRoot, 'sys', key);
  const key = (path: string) => path.replaceAll('/', '.');
  /** The sysctl being read or written, for the error message. */
  let touching = key(MAX);
  try {
    const max = conntrackMax(config, env.cores);
    if (max > 0) {
      if (!(await inInitialNetns(env.procRoot))) {
        for (const name of [key(MAX), HASHSIZE_KEY]) {
          actions.push({
            key: name,
            action: 'skipped',
            reason: 'host-wide, and this is not the host network namespace',
          });
        }
      } else {
        const current = await readNumber(sysctl(MAX));
        if (current === undefined) {
          actions.push({ key: key(MAX), action: 'skipped', reason: 'nf_conntrack is not loaded' });
        } else if (current < max) {
          await writeFile(sysctl(MAX), `${max}\n`);
          actions.push({ key: key(MAX), action: 'set', from: current, to: max });
        }
        touching = HASHSIZE_KEY;
        actions.push(...(await raiseHashsize(join(env.sysRoot, HASHSIZE), Math.floor(max / 4))));
      }
    }
    for (const [path, value] of timeoutSettings(config)) {
      if (value === 0) continue;
      touching = key(path);
      const current = await readNumber(sysctl(path));
      if (current === undefined) {
        actions.push({ key: key(path), action: 'skipped', reason: 'nf_conntrack is not loaded' });
      } else if (current !== value) {
        await writeFile(sysctl(path), `${value}\n`);
        actions.push({ key: key(path), action: 'set', from: current, to: value });
      }
    }
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    return { ok: false, error: `conntrack settings: cannot set ${touching}: ${code ?? message}`, actions };
  }
  return { ok: true, actions };
}

/** kube-proxy's SetMax: the buckets only grow, and a sysfs that refuses the write is noted. */
async function raiseHashsize(path: string, wanted: number): Promise<SysctlAction[]> {
  const current = await readNumber(path);
  if (current === undefined)
    return [{ key: HASHSIZE_KEY, action: 'skipped', reason: 'nf_conntrack is not loaded' }];
  if (current >= wanted) return [];
  try {
    await writeFile(path, `${wanted}\n`);
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    if (code === undefined || !UNWRITABLE.has(code)) throw error;
    return [{ key: HASHSIZE_KEY, action: 'skipped', reason: `/sys cannot be written here (${code})` }];
  }
  return [{ key: HASHSIZE_KEY, action: 'set', from: current, to: wanted }];
}

/** The host namespace is the one PID 1 lives in. */
async function inInitialNetns(procRoot: string): Promise<boolean> {
  const [self, init] = await Promise.all([
    readlink(join(procRoot, 'self/ns/net')),
    readlink(join(procRoot, '1/ns/net')).catch(() => undefined),
  ]);
  return self === init;
}

/** A number under /proc or /sys; undefined when the file does not exist (module not loaded). */
export async function readNumber(path: string): Promise<number | undefined> {
  try {
    return Number.parseInt(await readFile(path, 'utf8'), 10);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
