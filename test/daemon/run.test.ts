import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { NfacctCounters } from '../../dataplanes/iptables/nfacct.ts';
import { sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { startApiServer } from '../../harness/apiserver/server.ts';
import { logLevel, type RunEnvironment, runCommand } from '../../src/cli/run.ts';
import { NODES, SERVICES } from '../../src/kube/resources.ts';
import { eventually, RecordingDataplane } from './daemon-harness.ts';

function capture() {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: {
      write: (text: string) => {
        stdout += text;
        return true;
      },
    },
    stderr: { write: (text: string) => (stderr += text) },
    stdin: (async function* () {})(),
  };
  return { io, out: () => stdout, err: () => stderr };
}

/** A temporary dir with a config file and a fake /proc (so no host sysctl is ever written). */
async function workspace(t: { after(fn: () => Promise<void>): void }, config: string) {
  const dir = await mkdtemp(join(tmpdir(), 'kproxy-run-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'config.yaml'), config);
  const proc = join(dir, 'proc');
  await mkdir(join(proc, 'self/ns'), { recursive: true });
  await mkdir(join(proc, '1/ns'), { recursive: true });
  await symlink('net:[1]', join(proc, 'self/ns/net'));
  await symlink('net:[1]', join(proc, '1/ns/net'));
  return { config: join(dir, 'config.yaml'), proc };
}

const CONFIG = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: node-1
healthzBindAddress: 127.0.0.1:0
metricsBindAddress: 127.0.0.1:0
iptables:
  minSyncPeriod: 50ms
`;

/** nfacct as a kernel with it (counting `packets`) or without it; the host's is never touched. */
function fakeNfacct(packets: number | 'unavailable'): NfacctCounters {
  const counters = new Set<string>();
  return {
    async ensure(name) {
      if (packets === 'unavailable') throw new Error('Request rejected: EOPNOTSUPP');
      counters.add(name);
    },
    async packets(name) {
      if (!counters.has(name) || packets === 'unavailable') throw new Error(`no counter ${name}`);
      return packets;
    },
  };
}

function environment(proc: string, dataplane: RecordingDataplane, nfacct = fakeNfacct(5)) {
  let stop: (signal: string) => void = () => {};
  const stopped = new Promise<string>((resolve) => (stop = resolve));
  // run asks first for its own mode's dataplane, then for the others' only to clean them up.
  const others: RecordingDataplane[] = [];
  let handedOut = false;
  const env: RunEnvironment = {
    env: {},
    procRoot: proc,
    // No module/ in it: the conntrack hash size is skipped, the host's is never written.
    sysRoot: proc,
    shutdownRequested: () => stopped,
    lockPrefix: `kproxy-test-${process.pid}`,
    dataplane: async () => {
      if (!handedOut) {
        handedOut = true;
        return dataplane;
      }
      const other = new RecordingDataplane();
      others.push(other);
      return other;
    },
    nfacct,
  };
  return { env, stop, others };
}

describe('kproxy run', () => {
  test('maps kube-proxy verbosity onto log levels', () => {
    assert.deepEqual([0, 1, 2, 3, 4, 9].map(logLevel), ['info', 'info', 'debug', 'debug', 'trace', 'trace']);
  });

  // An unknown field loads leniently, as kube-proxy's loadConfig (test/config covers its warning);
  // a field kube-proxy's validation refuses stops the start.
  test('a config file with an invalid field is rejected at start, naming the file and the field', async (t) => {
    const ws = await workspace(t, `${CONFIG}oomScoreAdj: 5000\n`);
    const { io, err } = capture();
    const code = await runCommand(
      ['--config', ws.config],
      io,
      environment(ws.proc, new RecordingDataplane()).env,
    );
    assert.equal(code, 1);
    assert.match(err(), /^kproxy run: .*config\.yaml: oomScoreAdj: 5000 /);
  });

  test('an unknown flag is a usage error', async () => {
    const { io, err } = capture();
    assert.equal(await runCommand(['--no-such-flag'], io), 2);
    assert.match(err(), /unknown flag: --no-such-flag/);
  });

  test('runs until asked to stop, logs klog text, and a second instance on the node is refused', async (t) => {
    const api = await startApiServer();
    t.after(() => api.stop());
    api.state.apply(SERVICES, sampleService('default', 'web'));
    api.state.apply(NODES, sampleNode('node-1'));
    const ws = await workspace(t, CONFIG);
    const dataplane = new RecordingDataplane();
    const first = capture();
    const { env, stop, others } = environment(ws.proc, dataplane);
    const running = runCommand(['--config', ws.config, '--master', api.url, '--v', '2'], first.io, env);
    t.after(() => stop('SIGTERM'));
    await eventually('first sync', () => dataplane.syncs.length > 0);
    assert.ok(dataplane.last?.state.IPv4?.servicePorts.has('default/web:80/TCP'));
    // iptables mode on a kernel with nfacct: localhost NodePorts are counted, the count served.
    assert.equal(dataplane.last?.state.IPv4?.node.localhostNodePortsCounted, true);
    assert.equal(dataplane.last?.state.IPv4?.node.invalidDropsCounted, true);
    // The first sync does not wait for the health listener's thread, so the start may end after it.
    await eventually('started', () => first.out().includes('"kproxy started"'));
    const started = first
      .out()
      .split('\n')
      .find((line) => line.includes('"kproxy started"'));
    const metricsUrl = started?.match(/ metrics="([^"]+)"/)?.[1];
    const scraped = await (await fetch(`${metricsUrl}/metrics`)).text();
    assert.match(scraped, /^kubeproxy_iptables_localhost_nodeports_accepted_packets_total 5$/m);
    assert.match(scraped, /^kubeproxy_iptables_ct_state_invalid_dropped_packets_total 5$/m);
    // client-go's request metrics, under the API server's host:port, from the lists and watches made.
    const host = new URL(api.url).host;
    const requests = scraped.match(
      /^rest_client_requests_total\{code="200",host="([^"]+)",method="GET"\} (\d+)$/m,
    );
    assert.equal(requests?.[1], host);
    assert.ok(Number(requests?.[2]) >= 3, 'a list of services, slices and the node at least');
    assert.match(
      scraped,
      new RegExp(`^rest_client_request_duration_seconds_count\\{verb="GET",host="${host}"\\} [1-9]`, 'm'),
    );

    const second = capture();
    const refused = await runCommand(
      ['--config', ws.config, '--master', api.url],
      second.io,
      environment(ws.proc, new RecordingDataplane()).env,
    );
    assert.equal(refused, 1);
    assert.match(second.err(), /another kproxy \(pid \d+\) is already running in this network namespace/);

    stop('SIGTERM');
    assert.equal(await running, 0);
    // kube-proxy's default format: klog's header (severity, mmdd hh:mm:ss.uuuuuu, pid, file:line).
    const out = first.out();
    const header = `^I\\d{4} \\d\\d:\\d\\d:\\d\\d\\.\\d{6} +${process.pid} run\\.ts:\\d+\\] `;
    assert.match(out, new RegExp(`${header}"kproxy started" .*server="${api.url}"`, 'm'));
    assert.match(out, new RegExp(`${header}"stopping" signal="SIGTERM"$`, 'm'));
    assert.match(
      out,
      new RegExp(`${header}"effective configuration" config=\\{`, 'm'),
      '--v 2 enables debug lines',
    );
    // This /proc has no oom_score_adj: said once, as a warning, and the daemon ran all the same.
    assert.equal(
      out.match(/^W.*"oomScoreAdj -999 not applied" reason=".*oom_score_adj: ENOENT"$/gm)?.length,
      1,
      out,
    );
    assert.equal(dataplane.cleanups, 0, 'rules stay after a stop');
    // The other two modes' leftovers were removed once, after the first full sync.
    assert.deepEqual(
      others.map((other) => other.cleanups),
      [1, 1],
    );
  });

  test('--logging-format json (logging.format): the JSON lines of component-base; oomScoreAdj written at start', async (t) => {
    const api = await startApiServer();
    t.after(() => api.stop());
    api.state.apply(NODES, sampleNode('node-1'));
    const ws = await workspace(t, `${CONFIG}logging:\n  format: json\n  verbosity: 2\noomScoreAdj: -500\n`);
    await writeFile(join(ws.proc, 'self/oom_score_adj'), '0\n');
    const dataplane = new RecordingDataplane();
    const run = capture();
    const { env, stop } = environment(ws.proc, dataplane);
    const running = runCommand(['--config', ws.config, '--master', api.url], run.io, env);
    t.after(() => stop('SIGTERM'));
    await eventually('first sync', () => dataplane.syncs.length > 0);
    stop('SIGTERM');
    assert.equal(await running, 0);
    assert.equal(await readFile(join(ws.proc, 'self/oom_score_adj'), 'utf8'), '-500\n');
    const lines = run
      .out()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const line = (msg: string) =>
      lines.find((l) => l.msg === msg) ?? assert.fail(`no "${msg}" in ${run.out()}`);
    const started = line('kproxy started');
    // component-base's keys first: ts (ms since the epoch, with a fraction), caller, msg, v.
    assert.deepEqual(Object.keys(started).slice(0, 4), ['ts', 'caller', 'msg', 'v']);
    // Milliseconds: seconds or microseconds would be off from now by a factor of 1,000.
    assert.ok(Math.abs((started.ts as number) - Date.now()) < 60_000, 'ts is now, in milliseconds');
    assert.match(started.caller as string, /^cli\/run\.ts:\d+$/);
    assert.equal(started.v, 0);
    assert.equal(started.server, api.url);
    assert.equal(line('effective configuration').v, 2, 'debug lines are -v 2');
    assert.deepEqual([line('set oom_score_adj').from, line('set oom_score_adj').to], [0, -500]);
    assert.ok(!lines.some((l) => 'level' in l || 'time' in l || 'pid' in l), 'no pino keys left');
  });

  test('without nfacct in the kernel, localhost NodePorts are served uncounted and INVALID drops uncounted, each said in one line', async (t) => {
    const api = await startApiServer();
    t.after(() => api.stop());
    api.state.apply(NODES, sampleNode('node-1'));
    const ws = await workspace(t, CONFIG);
    const dataplane = new RecordingDataplane();
    const run = capture();
    const { env, stop } = environment(ws.proc, dataplane, fakeNfacct('unavailable'));
    const running = runCommand(['--config', ws.config, '--master', api.url], run.io, env);
    t.after(() => stop('SIGTERM'));
    await eventually('first sync', () => dataplane.syncs.length > 0);
    const node = dataplane.last?.state.IPv4?.node;
    assert.equal(node?.localhostNodePorts, true);
    assert.equal(node?.localhostNodePortsCounted, undefined, 'the counting rule is left out');
    assert.equal(node?.invalidDropsCounted, undefined, 'the INVALID drop is not counted');
    stop('SIGTERM');
    assert.equal(await running, 0);
    for (const metric of [
      'kubeproxy_iptables_localhost_nodeports_accepted_packets_total',
      'kubeproxy_iptables_ct_state_invalid_dropped_packets_total',
    ]) {
      const said = run
        .out()
        .split('\n')
        .filter((line) => line.includes(metric));
      assert.equal(said.length, 1, run.out());
      assert.match(said[0]!, /^W.* reason="Request rejected: EOPNOTSUPP"/);
    }
  });

  // execa registers signal-exit while a command runs; signal-exit re-raises a signal when it sees no
  // other listener, and a process.once() listener is already removed when signal-exit looks. Then a
  // SIGTERM during any kernel command (a periodic iptables check, say) killed kproxy outright.
  test('SIGTERM while an external command runs still reaches the clean stop', async () => {
    const run = fileURLToPath(new URL('../../src/cli/run.ts', import.meta.url));
    const script = `
        import { execa } from 'execa';
        import { processRunEnvironment } from ${JSON.stringify(run)};
        const environment = processRunEnvironment();
        const command = execa('sleep', ['60']);
        command.catch(() => {});
        console.log('ready');
        console.log('stopping on ' + (await environment.shutdownRequested()));
        command.kill();
      `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const ended = new Promise<unknown>((resolve) =>
      child.once('close', (code, signal) => resolve({ code, signal })),
    );
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('ready')) child.kill('SIGTERM');
    });
    assert.deepEqual(await ended, { code: 0, signal: null }, out);
    assert.match(out, /stopping on SIGTERM/);
  });
});
