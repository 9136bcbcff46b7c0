// A stuck nft (a wedged kernel lock, a hung netlink socket) must not stall syncing for ever: the
// sync that ran it fails within the runner's bound, saying which command and how long, and a
// later sync succeeds once nft works again. The stand-in nft sleeps while a flag file exists.
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CommandTimeoutError } from '../../../contract/dataplane-error.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { allowance } from '../../../harness/emulation.ts';
import { Lab } from '../../../harness/netns.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: a network namespace and nft (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED stuck nft kernel test: ${ROOT_REASON}\n`);

/**
 * Every nft command's bound here, the session's transactions included (the real ones are longer):
 * the real nft runs of this small state start and commit in ~10-20 ms of CPU (0.2-0.6 s measured at
 * load 50, so well under a second at the design load, harness/emulation.ts).
 */
const TIMEOUT_MS = 3_000;
/**
 * The failed sync's own work besides its two timeouts: planning this small state, a few tool starts
 * (as above) and killing and reaping the stuck one: under a second at the design load; 5 s there.
 */
const MARGIN_MS = allowance(5_000);

describe('a stuck nft', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let ns: string;
  let dir: string;
  let flag: string;

  before(async () => {
    lab = new Lab('nftstuck');
    ns = await lab.addNetns('node');
    dir = await mkdtemp(join(tmpdir(), 'kproxy-stuck-nft-'));
    flag = join(dir, 'stuck');
    // exec: the sleep is the runner's child itself, so the timeout's SIGKILL ends it.
    await writeFile(
      join(dir, 'nft'),
      `#!/bin/sh\n[ -e '${flag}' ] && exec sleep 600\nexec /usr/sbin/nft "$@"\n`,
    );
    await chmod(join(dir, 'nft'), 0o755);
  });
  after(async () => {
    await lab?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('fails the sync within its bound, reported by name, and the next sync succeeds once nft works', async () => {
    const commands = execaRunner(['env', `PATH=${dir}:${process.env.PATH}`, 'ip', 'netns', 'exec', ns], {
      timeoutMs: () => TIMEOUT_MS,
    });
    const dataplane = new NftablesDataplane({
      nft: commandNftRunner(commands, { sessionTimeoutMs: TIMEOUT_MS }),
      commands,
    });
    const web = servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: [endpoint('10.244.1.2')] });
    const dns = servicePort('dns', { clusterIP: '10.96.0.53', clusterEndpoints: [endpoint('10.244.1.3')] });
    await dataplane.start();
    await dataplane.sync(ipv4([web]), 'full');

    await writeFile(flag, '');
    const started = Date.now();
    await assert.rejects(dataplane.sync(ipv4([web, dns]), 'incremental'), (error: unknown) => {
      assert.ok(error instanceof CommandTimeoutError, String(error));
      assert.equal(error.command, 'nft');
      assert.match(error.message, /^nft .* did not finish within 3 s and was killed$/);
      return true;
    });
    // The incremental attempt and the full sync it falls back to each stop at their first stuck command.
    const took = Date.now() - started;
    assert.ok(took < 2 * TIMEOUT_MS + MARGIN_MS, `the sync failed after ${took} ms`);

    await rm(flag);
    await dataplane.sync(ipv4([web, dns]), 'incremental');
    const listed = await lab.exec(ns, 'nft', ['list', 'table', 'ip', 'kproxy']);
    assert.match(listed.stdout, /10\.96\.0\.53/, 'the Service added during the failed sync is programmed');
  });
});
