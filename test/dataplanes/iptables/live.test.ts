// The live dataplane's decisions, with a recording runner instead of the kernel.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { chooseBackend } from '../../../dataplanes/iptables/backend.ts';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import type { CommandRunner } from '../../../dataplanes/shared/command-runner.ts';
import { endpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';
import { FakeConntrack } from '../shared/conntrack/fake-conntrack.ts';
import { type RecordedCall, RecordingRunner } from './recording-runner.ts';
import { SCENARIOS } from './scenarios.ts';

const CANARY_OK = '-N KPROXY-PROXY-CANARY\n-A KPROXY-PROXY-CANARY -j RETURN\n';

/** A kernel where everything succeeds and the canary is in place. */
function healthy(call: RecordedCall) {
  if (call.args.includes('-S')) return { stdout: CANARY_OK };
  return undefined;
}

const before: DualStackState = SCENARIOS['cluster-ip']!;
const web = before.IPv4!.servicePorts.get('ns1/web:80/TCP')!;
const after: DualStackState = {
  IPv4: proxyState(
    'IPv4',
    [...before.IPv4!.servicePorts.values()]
      .filter((sp) => sp !== web)
      .concat({
        ...web,
        clusterEndpoints: [endpoint('10.244.9.9', 8080)],
      }),
  ),
};

test('the backend already holding kube-proxy or kproxy rules is chosen', async () => {
  const runner = new RecordingRunner((call) =>
    call.command === 'iptables-legacy-save'
      ? { stdout: ':KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j RETURN\n' }
      : undefined,
  );
  assert.equal((await chooseBackend(runner)).backend, 'legacy');
});

test('without proxy rules the backend with more rules wins, and nft by default', async () => {
  const legacyBusy = new RecordingRunner((call) =>
    call.command === 'iptables-legacy-save' ? { stdout: '-A INPUT -j ACCEPT\n' } : undefined,
  );
  assert.equal((await chooseBackend(legacyBusy)).backend, 'legacy');
  const missingLegacy = new RecordingRunner((call) =>
    call.command.includes('legacy') ? { exitCode: 127, stderr: 'not found' } : undefined,
  );
  assert.equal((await chooseBackend(missingLegacy)).backend, 'nft');
});

test('every command of a dataplane uses the one backend it chose', async () => {
  const runner = new RecordingRunner(healthy);
  const dataplane = new IptablesDataplane({ runner, backend: 'legacy' });
  await dataplane.start();
  await dataplane.sync(SCENARIOS['dual-stack']!, 'full');
  await dataplane.sync(SCENARIOS['dual-stack']!, 'incremental');
  const tools = runner.calls.map((c) => c.command).filter((c) => c.includes('tables'));
  assert.ok(tools.length > 10);
  assert.deepEqual(
    tools.filter((c) => !c.includes('-legacy')),
    [],
  );
});

test('cleanup reads both backends whole (a save by table name would create the table)', async () => {
  const runner = new RecordingRunner(healthy);
  await new IptablesDataplane({ runner, backend: 'legacy' }).cleanup();
  assert.deepEqual(
    runner.calls.map((c) => [c.command, ...c.args].join(' ')),
    ['iptables-nft-save', 'ip6tables-nft-save', 'iptables-legacy-save', 'ip6tables-legacy-save'],
  );
});

test('an incremental sync sends only the changed chains', async () => {
  const runner = new RecordingRunner(healthy);
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  await dataplane.sync(before, 'full');
  runner.calls.length = 0;
  const outcome = await dataplane.sync(after, 'incremental');
  assert.equal(outcome.kind, 'incremental');
  const [restore, ...more] = runner.restores();
  assert.equal(more.length, 0);
  assert.deepEqual(restore!.args, ['--noflush', '--wait', '5']);
  assert.doesNotMatch(restore!.input, /KPROXY-SERVICES|KPROXY-PROXY-CANARY/);
  assert.match(restore!.input, /--to-destination 10\.244\.9\.9:8080/);
});

test('a failed incremental restore falls back to a full sync that also deletes stale chains', async () => {
  const runner = new RecordingRunner(healthy);
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  await dataplane.sync(before, 'full');
  let failed = false;
  runner.answer((call) => {
    if (call.command.endsWith('-restore') && !failed) {
      failed = true;
      return { exitCode: 2, stderr: 'iptables-restore: line 3 failed' };
    }
    return healthy(call);
  });
  const outcome = await dataplane.sync(after, 'incremental');
  assert.equal(outcome.kind, 'full');
  const fullRestore = runner.restores().at(-1)!;
  assert.match(fullRestore.input, /^\*mangle\n:KPROXY-PROXY-CANARY/);
  // The endpoint chains of the old endpoints are gone from the new state: deleted by name.
  assert.equal(fullRestore.input.match(/^-X KPROXY-TEP-/gm)?.length, 3);
});

test('anything but a failed command in an incremental sync is a bug: it fails the sync instead of a fallback', async () => {
  const runner = new RecordingRunner(healthy);
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  await dataplane.sync(before, 'full');
  const restores = runner.restores().length;
  const bug = new TypeError("Cannot read properties of undefined (reading 'key')");
  let thrown = false;
  runner.answer((call) => {
    if (call.command.endsWith('-restore') && !thrown) {
      thrown = true;
      throw bug;
    }
    return healthy(call);
  });
  await assert.rejects(dataplane.sync(after, 'incremental'), (error) => error === bug);
  assert.equal(
    runner.restores().length,
    restores + 1,
    'the attempt that hit the bug, no full restore after it',
  );
  // The sync loop's retry after a failure is full.
  assert.equal((await dataplane.sync(after, 'full')).kind, 'full');
});

test('a missing canary turns an incremental sync into a full one', async () => {
  const runner = new RecordingRunner(healthy);
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  await dataplane.sync(before, 'full');
  runner.answer((call) => (call.args.includes('-S') ? { exitCode: 1, stderr: 'No chain' } : undefined));
  assert.equal(await dataplane.intact(), false);
  assert.equal((await dataplane.sync(after, 'incremental')).kind, 'full');
});

test('what a read of the tables finds, the next check reports, unless a sync overtook the read', async () => {
  // iptables-save answers nothing here: every chain of ours looks gone.
  const runner = new RecordingRunner(healthy);
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const gated: CommandRunner = {
    run: async (command, args, input) => {
      if (command.endsWith('-save')) await gate;
      return runner.run(command, args, input);
    },
  };
  const dataplane = new IptablesDataplane({ runner: gated, backend: 'nft', dumpShare: 1 });
  await dataplane.sync(before, 'full');
  assert.equal(await dataplane.intact(), true, 'the canaries are there; a read of the tables starts');
  assert.equal((await dataplane.sync(after, 'incremental')).kind, 'incremental', 'a sync overtakes it');
  release();
  await dataplane.settled();
  assert.equal(await dataplane.intact(), true, 'what the overtaken read saw is dropped');
  await dataplane.settled();
  assert.equal(await dataplane.intact(), false, 'what the next read saw is reported');
  assert.equal((await dataplane.sync(after, 'incremental')).kind, 'full');
});

/** The jumps as iptables-nft 1.8.9 lists them (`iptables -t TABLE -S CHAIN`) once in place. */
const JUMPS_LISTED: Readonly<Record<string, readonly string[]>> = {
  'filter INPUT': [
    '-A INPUT -m comment --comment "kproxy localnet firewall" -j KPROXY-FIREWALL',
    '-A INPUT -m conntrack --ctstate NEW -m comment --comment "kproxy load balancer firewall" -j KPROXY-PROXY-FIREWALL',
    '-A INPUT -m comment --comment "kproxy health check service ports" -j KPROXY-NODEPORTS',
    '-A INPUT -m conntrack --ctstate NEW -m comment --comment "kproxy externally-visible service portals" -j KPROXY-EXTERNAL-SERVICES',
  ],
  'filter FORWARD': [
    '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kproxy load balancer firewall" -j KPROXY-PROXY-FIREWALL',
    '-A FORWARD -m comment --comment "kproxy forwarding rules" -j KPROXY-FORWARD',
    '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kproxy service portals" -j KPROXY-SERVICES',
    '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kproxy externally-visible service portals" -j KPROXY-EXTERNAL-SERVICES',
  ],
  'filter OUTPUT': [
    '-A OUTPUT -m comment --comment "kproxy localnet firewall" -j KPROXY-FIREWALL',
    '-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kproxy load balancer firewall" -j KPROXY-PROXY-FIREWALL',
    '-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kproxy service portals" -j KPROXY-SERVICES',
  ],
  'nat PREROUTING': ['-A PREROUTING -m comment --comment "kproxy service portals" -j KPROXY-SERVICES'],
  'nat OUTPUT': ['-A OUTPUT -m comment --comment "kproxy service portals" -j KPROXY-SERVICES'],
  'nat POSTROUTING': ['-A POSTROUTING -m comment --comment "kproxy postrouting rules" -j KPROXY-POSTROUTING'],
};

/** A node holding every jump, but with `prerouting` as nat PREROUTING's rules. */
function listingJumps(prerouting: readonly string[]) {
  return (call: RecordedCall) => {
    const chain = call.args[call.args.indexOf('-S') + 1]!;
    const key = `${call.args[call.args.indexOf('-t') + 1]} ${chain}`;
    const rules = key === 'nat PREROUTING' ? prerouting : JUMPS_LISTED[key];
    if (!call.args.includes('-S') || rules === undefined) return healthy(call);
    return { stdout: [`-P ${chain} ACCEPT`, ...rules, ''].join('\n') };
  };
}

const preroutingInsert = (restore: RecordedCall | undefined) => restore!.input.match(/^-I .*/gm);

test('a full sync lists each built-in chain once and inserts, in its restore, only the jumps it lacks', async () => {
  const runner = new RecordingRunner(listingJumps(['-A PREROUTING -j ACCEPT']));
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  await dataplane.sync(before, 'full');
  const listed = runner.calls.filter((c) => c.args.includes('-S') && !c.args.includes('KPROXY-PROXY-CANARY'));
  assert.deepEqual(
    listed.map((c) => `${c.args[c.args.indexOf('-t') + 1]} ${c.args.at(-1)}`).sort(),
    Object.keys(JUMPS_LISTED).sort(),
  );
  // Listed in their spelling, or no rule into the target at all: nothing is left to -C.
  assert.deepEqual(
    runner.calls.filter((c) => c.args.includes('-C') || c.args.includes('-I')),
    [],
  );
  assert.deepEqual(preroutingInsert(runner.restores()[0]), [
    '-I PREROUTING 1 -m comment --comment "kproxy service portals" -j KPROXY-SERVICES',
  ]);
});

test('a rule into our chain in another spelling, or a chain not listed, is left to iptables -C', async () => {
  const foreign =
    '-A PREROUTING -s 10.0.0.0/8 -m comment --comment "kproxy service portals" -j KPROXY-SERVICES';
  for (const [what, answer, inserted] of [
    ['-C finds it', 0, null],
    ['-C does not', 1, ['-I PREROUTING 1 -m comment --comment "kproxy service portals" -j KPROXY-SERVICES']],
  ] as const) {
    const listing = listingJumps([foreign]);
    const runner = new RecordingRunner((call) =>
      call.args.includes('-C') ? { exitCode: answer } : listing(call),
    );
    await new IptablesDataplane({ runner, backend: 'nft' }).sync(before, 'full');
    const checked = runner.calls.filter((c) => c.args.includes('-C'));
    assert.deepEqual(
      checked.map((c) => c.args.slice(c.args.indexOf('-C') + 1, c.args.indexOf('-C') + 2)),
      [['PREROUTING']],
      what,
    );
    assert.deepEqual(preroutingInsert(runner.restores()[0]), inserted, what);
  }
  // A chain that cannot be listed: each of its jumps is checked as before.
  const runner = new RecordingRunner((call) =>
    call.args.includes('-S') && call.args.includes('PREROUTING') ? { exitCode: 1 } : listingJumps([])(call),
  );
  await new IptablesDataplane({ runner, backend: 'nft' }).sync(before, 'full');
  assert.equal(runner.calls.filter((c) => c.args.includes('-C')).length, 1);
});

test('the rule count follows incremental syncs', async () => {
  const runner = new RecordingRunner(healthy);
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  const one = { IPv4: proxyState('IPv4', [web]) };
  const full = await dataplane.sync(one, 'full');
  const two = {
    IPv4: proxyState('IPv4', [
      web,
      servicePort('other', {
        namespace: 'ns1',
        clusterIP: '10.96.0.99',
        clusterEndpoints: [endpoint('10.244.5.5', 80)],
      }),
    ]),
  };
  const grown = await dataplane.sync(two, 'incremental');
  // Its ClusterIP rule in a new leaf of the address tree, the jumps to that leaf and to its new
  // first-level bucket (10.96.0.99's low 5 bits are not web's), masquerade + choice in its SVC
  // chain, two in its SEP chain.
  assert.equal(grown.objectCount - full.objectCount, 7);
  const fresh = await new IptablesDataplane({ runner, backend: 'nft' }).sync(two, 'full');
  assert.equal(grown.objectCount, fresh.objectCount);
  assert.deepEqual(grown.iptablesRules, fresh.iptablesRules);
  // Back: the Service's chains deleted, its lines gone from the tree (the totals are kept as
  // chains change, not summed again: a deleted chain must take its rules with it).
  const shrunk = await dataplane.sync(one, 'incremental');
  assert.equal(shrunk.objectCount, full.objectCount);
  assert.deepEqual(shrunk.iptablesRules, full.iptablesRules);
});

test('UDP flows to a removed endpoint are deleted from conntrack after the sync; a restart keeps healthy ones', async () => {
  const dns = before.IPv4!.servicePorts.get('kube-system/dns:53/UDP')!;
  const flow = (replySrc: string) => ({ origDst: '10.96.0.53', dport: 53, replySrc });
  const conntrack = new FakeConntrack([flow('10.244.2.53'), flow('10.244.2.53')]);
  const runner = new RecordingRunner((call) => conntrack.answer(call.command, call.args) ?? healthy(call));
  // The first sync (start-up) judges every flow: all go to a serving endpoint, none is deleted.
  await new IptablesDataplane({ runner, backend: 'nft' }).sync(before, 'full');
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  await dataplane.sync(before, 'full');
  assert.deepEqual(conntrack.deletions(), []);
  const moved = {
    IPv4: proxyState('IPv4', [web, { ...dns, clusterEndpoints: [endpoint('10.244.2.54', 53)] }]),
  };
  const outcome = await dataplane.sync(moved, 'incremental');
  assert.deepEqual(conntrack.deletions(), [
    'conntrack -D -f ipv4 -p udp --orig-dst 10.96.0.53 --dport 53 --reply-src 10.244.2.53',
  ]);
  assert.deepEqual(
    outcome.conntrack.map((r) => [r.family, r.deleted]),
    [['IPv4', 2]],
  );
});
