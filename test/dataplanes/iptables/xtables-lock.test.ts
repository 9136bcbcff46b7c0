// A held xtables lock (kubelet, a CNI plugin, a stuck admin command) must not stall syncing for
// ever: like kube-proxy, every iptables tool waits 5 s for it (`--wait 5`), then the sync fails
// and a later one succeeds once the lock is free. The lock is a private file (XTABLES_LOCKFILE),
// never the host's /run/xtables.lock; iptables-legacy takes it (iptables-nft has no such lock).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { IptablesCommandError, IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { allowance } from '../../../harness/emulation.ts';
import { Lab } from '../../../harness/netns.ts';
import { endpoint, ipv4, servicePort } from '../../../harness/proxy-states.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: a network namespace and iptables-legacy (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED xtables lock kernel test: ${ROOT_REASON}\n`);

/** IPTABLES_WAIT: each iptables tool gives up on the lock after this. */
const WAIT_MS = 5_000;
/**
 * The failed sync's own work besides its two waits: planning this small state and a few tool starts
 * (`ip netns exec`, iptables-legacy and its restore: ~10-20 ms of CPU each, 0.1-0.4 s measured at
 * load 50): under a second at the design load (harness/emulation.ts); 5 s there.
 */
const MARGIN_MS = allowance(5_000);

describe('a held xtables lock', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let ns: string;
  let dir: string;
  let lock: string;
  let holder: ChildProcess | undefined;

  before(async () => {
    lab = new Lab('xtlock');
    ns = await lab.addNetns('node');
    dir = await mkdtemp(join(tmpdir(), 'kproxy-xtables-lock-'));
    lock = join(dir, 'xtables.lock');
    await writeFile(lock, '');
  });
  after(async () => {
    holder?.kill('SIGKILL');
    await lab?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Holds the lock until killed: flock execs the shell, which execs sleep, all one PID. */
  async function holdLock(): Promise<ChildProcess> {
    const child = spawn('flock', ['--no-fork', lock, 'sh', '-c', 'echo held; exec sleep 600'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
    return child;
  }

  test('fails the sync after the 5 s wait, naming the lock, and the next sync succeeds once it is free', async () => {
    const runner = execaRunner(['env', `XTABLES_LOCKFILE=${lock}`, 'ip', 'netns', 'exec', ns]);
    const dataplane = new IptablesDataplane({ runner, backend: 'legacy' });
    const web = servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: [endpoint('10.244.1.2')] });
    const dns = servicePort('dns', { clusterIP: '10.96.0.53', clusterEndpoints: [endpoint('10.244.1.3')] });
    await dataplane.start();
    await dataplane.sync(ipv4([web]), 'full');

    holder = await holdLock();
    const started = Date.now();
    await assert.rejects(dataplane.sync(ipv4([web, dns]), 'incremental'), (error: unknown) => {
      assert.ok(error instanceof IptablesCommandError, String(error));
      assert.match(
        error.message,
        /^iptables-legacy\S* failed: .*holding the xtables lock\. Stopped waiting after 5s/s,
      );
      return true;
    });
    // The incremental sync's canary check waits once, then the full sync's restore does.
    const took = Date.now() - started;
    assert.ok(took < 2 * WAIT_MS + MARGIN_MS, `the sync failed after ${took} ms`);

    const exited = new Promise((resolve) => holder!.once('exit', resolve));
    holder.kill('SIGKILL');
    await exited;
    await dataplane.sync(ipv4([web, dns]), 'incremental');
    const saved = await lab.exec(ns, 'iptables-legacy-save', ['-t', 'nat']);
    assert.match(saved.stdout, /10\.96\.0\.53/, 'the Service added during the failed sync is programmed');
  });
});
