// kproxy run removes another mode's leftovers only after its own first full sync has committed
// (issue 29): never before (a window with neither rule set), once, and again after a failure; beside
// the syncs, which an IPVS drain must not hold up.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SyncKind } from '../../contract/dataplane.ts';
import { ipv4 } from '../../harness/proxy-states.ts';
import { OtherModesCleanup } from '../../src/daemon/other-modes-cleanup.ts';
import { RecordingDataplane } from './daemon-harness.ts';

const STATE = ipv4([]);

/** The running mode's dataplane and two others, writing one shared order of events. */
function setup() {
  const events: string[] = [];
  const running = new (class extends RecordingDataplane {
    override async sync(state: typeof STATE, kind: SyncKind) {
      const outcome = await super.sync(state, kind);
      events.push(`sync ${kind}`);
      return outcome;
    }
  })();
  const other = (name: string, removed: readonly string[]) =>
    new (class extends RecordingDataplane {
      failCleanup = false;
      /** The cleanup waits for this (an IPVS drain). */
      drained: Promise<void> = Promise.resolve();
      override async cleanup() {
        await super.cleanup();
        await this.drained;
        if (this.failCleanup) throw new Error(`${name} refused`);
        events.push(`cleanup ${name}`);
        return removed;
      }
    })();
  const iptables = other('iptables', ['iptables-nft nat: 3 kproxy chain(s)']);
  const ipvs = other('ipvs', []);
  const logged: string[] = [];
  const dataplane = new OtherModesCleanup(running, async () => [iptables, ipvs], {
    removed: (_mode, what) => logged.push(...what),
    failed: (error) => logged.push(`failed: ${String(error)}`),
  });
  return { events, running, iptables, ipvs, logged, dataplane };
}

test('the other modes are cleaned once, after the first full sync returned, not before', async () => {
  const { events, dataplane, logged } = setup();
  await dataplane.start();
  await dataplane.sync(STATE, 'incremental');
  assert.deepEqual(events, ['sync incremental'], 'an incremental sync may leave stale rules: not yet');
  await dataplane.sync(STATE, 'full');
  await dataplane.cleaned();
  await dataplane.sync(STATE, 'full');
  assert.deepEqual(events, [
    'sync incremental',
    'sync full',
    'cleanup iptables',
    'cleanup ipvs',
    'sync full',
  ]);
  // Only what was removed is logged: ipvs had nothing.
  assert.deepEqual(logged, ['iptables-nft nat: 3 kproxy chain(s)']);
});

test('a failed full sync cleans nothing; a failed cleanup is retried after the next full sync only', async () => {
  const { events, running, iptables, dataplane, logged } = setup();
  running.failNext = 1;
  await assert.rejects(dataplane.sync(STATE, 'full'));
  assert.deepEqual(events, []);
  iptables.failCleanup = true;
  await dataplane.sync(STATE, 'full');
  await dataplane.cleaned();
  assert.deepEqual(logged, ['failed: Error: iptables refused']);
  iptables.failCleanup = false;
  await dataplane.sync(STATE, 'incremental');
  assert.deepEqual(events, ['sync full', 'sync incremental']);
  await dataplane.sync(STATE, 'full');
  await dataplane.cleaned();
  assert.deepEqual(events, [
    'sync full',
    'sync incremental',
    'sync full',
    'cleanup iptables',
    'cleanup ipvs',
  ]);
});

test('everything else is the running mode’s own', async () => {
  const { running, dataplane, iptables } = setup();
  assert.equal(dataplane.mode, running.mode);
  running.intactAnswer = false;
  assert.equal(await dataplane.intact(), false);
  await dataplane.cleanup();
  assert.deepEqual([running.cleanups, iptables.cleanups], [1, 0]);
});

test('syncs go on while a cleanup drains; a full sync meanwhile starts no second one', async () => {
  const { events, ipvs, dataplane } = setup();
  let drainEnds = () => {};
  ipvs.drained = new Promise((resolve) => {
    drainEnds = resolve;
  });
  await dataplane.sync(STATE, 'full');
  await dataplane.sync(STATE, 'incremental');
  await dataplane.sync(STATE, 'full');
  assert.deepEqual(events, ['sync full', 'cleanup iptables', 'sync incremental', 'sync full']);
  drainEnds();
  await dataplane.cleaned();
  assert.deepEqual(events.slice(4), ['cleanup ipvs']);
  await dataplane.sync(STATE, 'full');
  assert.deepEqual(events.slice(4), ['cleanup ipvs', 'sync full'], 'done once');
});
