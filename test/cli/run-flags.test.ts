// `kproxy run`'s own kube-proxy flags: --write-config-to (kube-proxy's way to check a command line
// without starting), --version, --help (which wins over everything, as cobra's), and the first log
// line that names the mode and why, for each way a mode is chosen.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseFlags } from '../../src/cli/parse-flags.ts';
import { type RunEnvironment, runCommand } from '../../src/cli/run.ts';
import { loadProxyConfig } from '../../src/config/config.ts';
import { PROXY_FLAG_OPTIONS, PROXY_FLAGS } from '../../src/config/proxy-flags.ts';
import { captureIO } from './capture-io.ts';

/** These flags end run before it takes the lock or touches the node: any use of this fails the test. */
const untouchable = new Proxy({} as RunEnvironment, {
  get: (_target, key) => {
    throw new Error(`run used its environment (${String(key)}) before exiting`);
  },
});

async function workspace(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kproxy-run-flags-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function writeConfigTo(args: string[], dir: string) {
  const out = join(dir, 'written.yaml');
  const { io, stdout, stderr } = captureIO();
  const code = await runCommand(
    [...args, `--write-config-to=${out}`, '--logging-format=json'],
    io,
    untouchable,
  );
  assert.equal(code, 0, stderr());
  const lines = stdout()
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { msg: string; reason?: string; level: number });
  return { written: await readFile(out, 'utf8'), lines };
}

test('--write-config-to writes the effective configuration, which loads back to the same configuration', async (t) => {
  const dir = await workspace(t);
  const args = [
    '--proxy-mode=iptables',
    '--hostname-override=node-7',
    '--iptables-sync-period=1m30s',
    '--nodeport-addresses=10.0.0.0/8',
    '--cluster-cidr=10.244.0.0/16,fd00:10:244::/56',
    '--oom-score-adj=-998',
    '-v=3',
  ];
  const { written } = await writeConfigTo(args, dir);
  assert.match(written, /^apiVersion: kubeproxy\.config\.k8s\.io\/v1alpha1\n/);
  assert.match(written, /\n {2}syncPeriod: 1m30s\n/);
  assert.match(written, /\nkind: KubeProxyConfiguration\n/);
  const env = (files: Record<string, string>) => ({
    hostname: 'host',
    readFile: async (p: string) => files[p]!,
  });
  const parsed = parseFlags([...args, '--logging-format=json'], PROXY_FLAG_OPTIONS);
  assert.ok(parsed.ok);
  const fromFlags = await loadProxyConfig(parsed.values, env({}));
  const fromFile = await loadProxyConfig({ config: 'w.yaml' }, env({ 'w.yaml': written }));
  assert.ok(fromFlags.ok && fromFile.ok);
  assert.deepEqual(fromFile.config, fromFlags.config);
});

test('--write-config-to writes zeros and an empty metrics address as they are (the file reads them as defaults, as kube-proxy)', async (t) => {
  const dir = await workspace(t);
  const { written } = await writeConfigTo(['--iptables-min-sync-period=0', '--metrics-bind-address='], dir);
  assert.match(written, /\niptables:\n(?: {2}.*\n)* {2}minSyncPeriod: 0s\n/);
  assert.match(written, /\nmetricsBindAddress: ""\n/);
});

test('the first log line names the mode and why: flag, file or default', async (t) => {
  const dir = await workspace(t);
  const flag = await writeConfigTo(['--proxy-mode=ipvs'], dir);
  assert.deepEqual([flag.lines[0]!.msg, flag.lines[0]!.reason], ['proxy mode ipvs', '--proxy-mode']);
  const file = join(dir, 'c.yaml');
  await writeFile(
    file,
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\n',
  );
  const fromFile = await writeConfigTo([`--config=${file}`, '--proxy-mode=ipvs'], dir);
  assert.deepEqual(
    [fromFile.lines[0]!.msg, fromFile.lines[0]!.reason],
    ['proxy mode iptables', `mode in ${file}`],
  );
  assert.match(fromFile.lines[1]!.msg, /^--proxy-mode is ignored: --config is given/);
  const unset = await writeConfigTo([], dir);
  assert.equal(unset.lines[0]!.msg, 'proxy mode nftables');
  assert.match(
    unset.lines[0]!.reason!,
    /^no mode set: kproxy's default, nftables \(kube-proxy 1\.37 would take iptables/,
  );
});

test('--version prints the version and exits 0', async () => {
  const { io, stdout } = captureIO();
  assert.equal(await runCommand(['--version'], io, untouchable), 0);
  assert.match(stdout(), /^kproxy \d+\.\d+\.\d+\n$/);
});

test('--help lists every flag and wins over a bad --config, as cobra', async () => {
  const { io, stdout, stderr } = captureIO();
  assert.equal(await runCommand(['--config', '/nonexistent/kproxy.yaml', '--help'], io, untouchable), 0);
  assert.equal(stderr(), '');
  for (const name of Object.keys(PROXY_FLAGS)) assert.match(stdout(), new RegExp(`--${name}\\b`), name);
  assert.match(stdout(), /-v, --v VALUE/);
});

test('--init-only sets the conntrack sysctls and exits 0 without making a dataplane or reaching the API server', async (t) => {
  const dir = await workspace(t);
  // A /proc of the host's network namespace, in a temporary directory: the node's is never touched.
  const proc = join(dir, 'proc');
  for (const pid of ['self', '1']) {
    await mkdir(join(proc, pid, 'ns'), { recursive: true });
    await symlink('net:[1]', join(proc, pid, 'ns/net'));
  }
  const established = join(proc, 'sys/net/netfilter/nf_conntrack_tcp_timeout_established');
  await mkdir(join(established, '..'), { recursive: true });
  await writeFile(established, '432000\n');
  const refuse = (what: string) => () => {
    throw new Error(`--init-only reached ${what}`);
  };
  const environment: RunEnvironment = {
    env: {},
    procRoot: proc,
    sysRoot: join(dir, 'sys'),
    shutdownRequested: refuse('the wait for a signal'),
    lockPrefix: `kproxy-run-flags-${process.pid}`,
    dataplane: refuse('the dataplane'),
    nfacct: { ensure: refuse('nfacct'), packets: refuse('nfacct') },
  };
  const { io, stderr } = captureIO();
  const code = await runCommand(
    ['--init-only', '--hostname-override=node-1', '--logging-format=json'],
    io,
    environment,
  );
  assert.equal(code, 0, stderr());
  assert.equal(await readFile(established, 'utf8'), '86400\n', "kube-proxy's default: 24h");
});
