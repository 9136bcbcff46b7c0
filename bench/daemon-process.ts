// The real `kproxy run` daemon in a bench's namespace, as the daemon and churn sections run it:
// pointed with --master at the stand-in API server in the same namespace, its metrics scraped from
// inside it. Installed (`kproxy install --root`, the unit's command and environment) or from the
// checkout.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import type { Lab, LabProcess } from '../harness/netns.ts';
import { COMMAND_PATH, install, UNIT_PATH } from '../src/cli/install.ts';
import { round } from './measure.ts';

const REPO = join(import.meta.dirname, '..');
export const NODE_BIN = join(REPO, 'node_modules/.bin/node');
const API_MAIN = join(REPO, 'harness/apiserver/main.ts');
export const API = 'http://127.0.0.1:6443';
const METRICS = 'http://127.0.0.1:10249/metrics';

/** The daemon tests' configuration (test/daemon/daemon-netns.test.ts), with the default sync periods; JSON logs, which the benchmarks parse. */
export const CONFIG = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: node-0
clusterCIDR: 10.244.0.0/16
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
logging:
  format: json
`;

/** Prints a page fetched with Node's fetch (no curl needed); exits 1 when it cannot. */
const FETCH_SCRIPT = `fetch(process.argv[1], { signal: AbortSignal.timeout(5000) })
  .then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
  .then((t) => process.stdout.write(t), () => process.exit(1));`;

/** The stand-in API server serving `data` (a JSON List) on API, inside `ns`, once it listens. */
export async function startApiServer(
  lab: Lab,
  ns: string,
  data: string,
  timeoutMs: number,
  nodeFlags: readonly string[] = [],
): Promise<LabProcess> {
  const api = lab.spawn(ns, NODE_BIN, [...nodeFlags, API_MAIN, '--port', '6443', '--data', data]);
  await api.waitFor('listening', timeoutMs);
  return api;
}

/** The daemon's metrics page, scraped from inside the namespace; undefined while it does not answer. */
export async function scrape(ns: string): Promise<string | undefined> {
  const result = await execa(
    'nsenter',
    [`--net=/run/netns/${ns}`, '--', NODE_BIN, '-e', FETCH_SCRIPT, METRICS],
    {
      reject: false,
    },
  );
  return result.exitCode === 0 ? result.stdout : undefined;
}

/** The value of an unlabelled sample in a Prometheus text page. */
export function sample(page: string | undefined, name: string): number | undefined {
  const line = page?.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

export interface DaemonCommand {
  readonly node: string;
  /** Node's own flags, before the entry. */
  readonly flags: readonly string[];
  readonly entry: string;
  readonly env: Readonly<Record<string, string>>;
}

export function fromCheckout(): DaemonCommand {
  return { node: NODE_BIN, flags: [], entry: join(REPO, 'bin/kproxy.ts'), env: {} };
}

/** kproxy installed under `root`, run with the unit's command and environment. */
export async function installed(root: string): Promise<DaemonCommand> {
  await install(root);
  const unit = readFileSync(join(root, UNIT_PATH), 'utf8');
  const [node, ...rest] = /^ExecStart=(.*) run /m.exec(unit)![1]!.split(' ');
  const entry = rest.pop()!;
  // systemd creates the unit's RuntimeDirectory (/run/<name>, where TMPDIR points) at start: here
  // a directory under the scratch root stands in for it.
  const runtime = /^RuntimeDirectory=(\S+)$/m.exec(unit)?.[1];
  const runtimeDir = join(root, 'run', runtime ?? '');
  if (runtime !== undefined) mkdirSync(runtimeDir, { recursive: true, mode: 0o700 });
  const env: Record<string, string> = {};
  for (const [, name, value] of unit.matchAll(/^Environment=(\w+)=(\S*)$/gm)) {
    env[name!] = runtime !== undefined && value === `/run/${runtime}` ? runtimeDir : value!;
  }
  return { node: join(root, node!), flags: rest, entry: join(root, entry), env };
}

/**
 * kproxy installed under `root`, run as its `kproxy` command runs it (the container image's
 * entrypoint): the command script's exported variables and the node command line it execs.
 */
export async function installedCommand(root: string): Promise<DaemonCommand> {
  await install(root);
  const script = readFileSync(join(root, COMMAND_PATH), 'utf8');
  const env: Record<string, string> = {};
  // `export NAME="${NAME-value}"`: the value when the environment does not set NAME.
  for (const [, name, value] of script.matchAll(/^export (\w+)="\$\{\w+-([^}]*)\}"$/gm)) env[name!] = value!;
  const [node, ...rest] = /^exec (.*) "\$@"$/m.exec(script)![1]!.split(' ');
  const entry = rest.pop()!;
  return { node: join(root, node!), flags: rest, entry: join(root, entry), env };
}

/**
 * `kproxy run --config FILE --master API` inside `ns`. Through `nsenter`, which execs: the PID is
 * node's own. Not a Lab process: the caller kills it however it ends.
 */
export function spawnDaemon(
  ns: string,
  { node, flags, entry, env }: DaemonCommand,
  config: string,
  extra: { readonly nodeFlags?: readonly string[]; readonly env?: Readonly<Record<string, string>> } = {},
): ChildProcess {
  return spawn(
    'nsenter',
    [
      `--net=/run/netns/${ns}`,
      '--',
      node,
      ...flags,
      ...(extra.nodeFlags ?? []),
      entry,
      'run',
      '--config',
      config,
      '--master',
      API,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env, ...extra.env } },
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * When the daemon's first sync ended (ms since the epoch): the last-successful-sync timestamp, set
 * only by a successful sync (0 until then). Throws when the daemon exits or `timeoutMs` passes.
 */
export async function firstSyncAt(
  ns: string,
  child: ChildProcess,
  spawnedAt: number,
  timeoutMs: number,
  stderr: () => string,
): Promise<number> {
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`kproxy run exited (${child.exitCode ?? child.signalCode}): ${stderr().trim()}`);
    }
    if (Date.now() - spawnedAt > timeoutMs) throw new Error(`no sync within ${timeoutMs / 1000} s`);
    const last = sample(
      await scrape(ns),
      'kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}',
    );
    if (last !== undefined && last > 0) return last * 1000;
    await sleep(500);
  }
}

/** VmRSS, VmHWM, RssAnon, RssFile, RssShmem of a process, in MiB. */
export function processMemoryMiB(pid: number): Record<string, number> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => {
    const match = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(status);
    if (!match) throw new Error(`/proc/${pid}/status has no ${name}`);
    return round(Number(match[1]) / 1024);
  };
  return {
    rssMiB: field('VmRSS'),
    peakRssMiB: field('VmHWM'),
    rssAnonMiB: field('RssAnon'),
    rssFileMiB: field('RssFile'),
    rssShmemMiB: field('RssShmem'),
  };
}
