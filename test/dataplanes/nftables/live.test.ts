import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { FakeConntrack } from '../shared/conntrack/fake-conntrack.ts';
import { FakeNft } from './fake-nft.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { RecordingCommandRunner, RecordingNftRunner } from './recording-nft-runner.ts';

const web = (...ips: string[]) =>
  servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: ips.map((ip) => endpoint(ip)) });
const dns = (...ips: string[]) =>
  servicePort('dns', {
    clusterIP: '10.96.0.53',
    protocol: 'UDP',
    port: 53,
    clusterEndpoints: ips.map((ip) => endpoint(ip, 5353)),
  });

function dataplane() {
  const nft = new RecordingNftRunner();
  const commands = new RecordingCommandRunner();
  return { nft, commands, dp: new NftablesDataplane({ nft, commands }) };
}

const isFull = (script: string) => script.startsWith('add table ip kproxy\ndelete table ip kproxy\n');

test('the first sync is full whatever was asked; later incremental syncs send only the change', async () => {
  const { nft, dp } = dataplane();
  assert.equal((await dp.sync(ipv4([web('10.244.1.10')]), 'incremental')).kind, 'full');
  assert.ok(isFull(nft.scripts[0]!));
  const outcome = await dp.sync(ipv4([web('10.244.1.11')]), 'incremental');
  assert.equal(outcome.kind, 'incremental');
  assert.equal(
    nft.scripts[1],
    'delete element ip kproxy backends-tcp { 10.96.0.10 . 80 . 0 }\n' +
      'add element ip kproxy backends-tcp { 10.96.0.10 . 80 . 0 : 10.244.1.11 . 8080 }\n',
  );
  await dp.sync(ipv4([web('10.244.1.11')]), 'incremental');
  assert.equal(nft.scripts.length, 2, 'no change runs no nft');
});

test('a full sync returns once the rules are written; an incremental sync right after waits for the indexes built meanwhile', async () => {
  const { nft, dp } = dataplane();
  // Over 1,000 service ports: the index is built batch by batch after the full sync returns.
  const ports = (first: string) =>
    Array.from({ length: 2500 }, (_, i) =>
      servicePort(`svc${i}`, {
        clusterIP: `10.96.${i >> 8}.${i & 255}`,
        clusterEndpoints: [endpoint(i === 0 ? first : `10.244.${i >> 8}.${i & 255}`)],
      }),
    );
  let settled = false;
  await dp.sync(ipv4(ports('10.244.0.0')), 'full');
  const background = dp.settled().then(() => {
    settled = true;
  });
  assert.equal(settled, false, 'the indexes are still being built when the full sync returns');
  const outcome = await dp.sync(ipv4(ports('10.244.200.1')), 'incremental');
  assert.equal(outcome.kind, 'incremental');
  assert.equal(settled, true, 'the incremental sync waited for them');
  assert.match(nft.scripts.at(-1)!, /^delete element ip kproxy backends-tcp \{ 10\.96\.0\.0 \. 80 \. 0 \}/);
  assert.ok(nft.scripts.at(-1)!.length < 300, 'a fragment, not a diff of the whole ruleset');
  await background;
});

test('an incremental sync given the changed keys touches only those service ports', async () => {
  const { nft, dp } = dataplane();
  await dp.sync(ipv4([web('10.244.1.10'), dns('10.244.1.20')]), 'full');
  // dns changed too, but the model says only web did: the dataplane trusts it and does not compare.
  const next = ipv4([web('10.244.1.11'), dns('10.244.1.21')]);
  assert.equal((await dp.sync(next, 'incremental', new Set(['default/web:80/TCP']))).kind, 'incremental');
  assert.match(nft.scripts[1]!, /10\.244\.1\.11/);
  assert.doesNotMatch(nft.scripts[1]!, /10\.244\.1\.2/);
});

test('a refused incremental transaction falls back to a full one in the same sync', async () => {
  const { nft, dp } = dataplane();
  await dp.sync(ipv4([web('10.244.1.10')]), 'full');
  nft.failures.push((script) => !isFull(script));
  const outcome = await dp.sync(ipv4([web('10.244.1.11')]), 'incremental');
  assert.equal(outcome.kind, 'full');
  assert.ok(isFull(nft.scripts.at(-1)!));
  assert.match(nft.scripts.at(-1)!, /10\.244\.1\.11 \. 8080/);
});

test('anything but a refusal in an incremental sync is a bug: it fails the sync, and the retry is full', async () => {
  const { nft, dp } = dataplane();
  await dp.sync(ipv4([web('10.244.1.10')]), 'full');
  const bug = new TypeError("Cannot read properties of undefined (reading 'key')");
  const run = nft.run;
  nft.run = async () => {
    nft.run = run;
    throw bug;
  };
  await assert.rejects(dp.sync(ipv4([web('10.244.1.11')]), 'incremental'), (error) => error === bug);
  assert.equal(nft.scripts.length, 1, 'no full sync in its place');
  // The record the bug may have left half-updated is forgotten: even an incremental retry is full.
  assert.equal((await dp.sync(ipv4([web('10.244.1.11')]), 'incremental')).kind, 'full');
  assert.ok(isFull(nft.scripts.at(-1)!));
});

test('a refused full sync throws and leaves no record, so the retry is full again', async () => {
  const { nft, dp } = dataplane();
  await dp.sync(ipv4([web('10.244.1.10')]), 'full');
  nft.failures.push(isFull, () => true);
  await assert.rejects(dp.sync(ipv4([web('10.244.1.11')]), 'incremental'));
  assert.equal(await dp.intact(), false);
  await dp.sync(ipv4([web('10.244.1.11')]), 'incremental');
  assert.ok(isFull(nft.scripts.at(-1)!));
});

test('intact() is false once our table was replaced behind our back', async () => {
  const { nft, dp } = dataplane();
  await dp.sync(ipv4([web('10.244.1.10')]), 'full');
  assert.equal(await dp.intact(), true);
  nft.canary = { ip: 99 };
  assert.equal(await dp.intact(), false, 'another nonce: replaced');
  nft.canary = {};
  assert.equal(await dp.intact(), false, 'no canary: deleted or flushed');
});

test('start() adopts an earlier table from its chains: the first full sync rewrites it in place', async () => {
  const { nft, dp } = dataplane();
  const chain = (table: string, name: string) => ({ chain: { family: 'ip', table, name, handle: 1 } });
  nft.chains.ip = {
    nftables: [
      { metainfo: { version: '1.0.6' } },
      chain('kproxy', 'cluster-ip'),
      chain('kproxy', 'backends-tcp-70'),
      chain('kproxy', 'affinity-0123456789abcdef'),
      chain('someone-else', 'cluster-ip-x'),
    ],
  };
  await dp.start();
  const outcome = await dp.sync(ipv4([web('10.244.1.10')]), 'full');
  assert.equal(outcome.kind, 'full');
  const script = nft.scripts[0]!;
  assert.ok(!isFull(script), 'no table replaced');
  assert.match(script, /^flush chain ip kproxy cluster-ip$/m, 'adopted chains are rewritten');
  assert.match(script, /^delete chain ip kproxy backends-tcp-70$/m, 'chains no longer used are deleted');
  assert.match(script, /^delete set ip kproxy affinity-0123456789abcdef$/m, 'with their affinity set');
  assert.doesNotMatch(script, /cluster-ip-x/, 'other tables are not ours');
  assert.match(script, /^flush map ip kproxy backends-tcp$/m, 'elements are replaced');
  assert.match(
    script,
    /^add element ip kproxy backends-tcp \{ 10\.96\.0\.10 \. 80 \. 0 : 10\.244\.1\.10 \. 8080 \}$/m,
  );
  assert.match(
    script,
    /^flush set ip kproxy canary\nadd element ip kproxy canary \{ 1 \}\n$/m,
    'a new nonce',
  );
  assert.equal((await dp.sync(ipv4([web('10.244.1.10')]), 'incremental')).kind, 'incremental');
});

const ourChains = { nftables: [{ chain: { family: 'ip', table: 'kproxy', name: 'services', handle: 1 } }] };
const affine = servicePort('web', {
  clusterIP: '10.96.0.10',
  clusterEndpoints: [endpoint('10.244.1.10')],
  sessionAffinity: { timeoutSeconds: 10800 },
});

test('a full sync on a node with our tables rewrites them in place: dynamic sets keep their elements', async () => {
  const { nft, dp } = dataplane();
  await dp.sync(ipv4([affine]), 'full');
  nft.chains.ip = ourChains;
  assert.equal((await dp.sync(ipv4([affine]), 'full')).kind, 'full');
  const script = nft.scripts.at(-1)!;
  assert.doesNotMatch(script, /^delete table/m, 'no table replaced');
  // Whatever the affinity sets are called (issue 16 renames them): the dynamic ones are not flushed.
  const dynamic = [
    ...nft.scripts[0]!.matchAll(/^add (?:set|map) ip kproxy (\S+) \{[^}]*(?:dynamic|timeout)/gm),
  ];
  assert.ok(dynamic.length > 0, 'the state has a dynamic set');
  for (const [, name] of dynamic)
    assert.doesNotMatch(script, new RegExp(`^flush (set|map) ip kproxy ${name}$`, 'm'));
  assert.match(script, /^flush map ip kproxy backends-tcp$/m, 'the maps kproxy fills are refilled');
  assert.match(script, /^add element ip kproxy canary \{ 2 \}$/m);
  assert.equal(await dp.intact(), true);
});

test('a full sync that nft refuses in place replaces the tables instead', async () => {
  const { nft, dp } = dataplane();
  await dp.sync(ipv4([web('10.244.1.10')]), 'full');
  nft.chains.ip = ourChains;
  nft.failures.push((script) => !isFull(script));
  assert.equal((await dp.sync(ipv4([web('10.244.1.11')]), 'full')).kind, 'full');
  assert.ok(isFull(nft.scripts.at(-1)!));
  assert.match(nft.scripts.at(-1)!, /^add element ip kproxy canary \{ 2 \}$/m);
  assert.equal(await dp.intact(), true);
});

test('after adoption the first sync deletes only the UDP flows of endpoints gone while we were down', async () => {
  const nft = new RecordingNftRunner();
  nft.chains.ip = { nftables: [{ chain: { family: 'ip', table: 'kproxy', name: 'cluster-ip' } }] };
  const flow = (replySrc: string) => ({ origDst: '10.96.0.53', dport: 53, replySrc });
  const conntrack = new FakeConntrack([flow('10.244.1.10'), flow('10.244.2.10')]);
  const dp = new NftablesDataplane({ nft, commands: conntrack });
  await dp.start();
  const outcome = await dp.sync(ipv4([dns('10.244.2.10')]), 'full');
  assert.deepEqual(conntrack.deletions(), [
    'conntrack -D -f ipv4 -p udp --orig-dst 10.96.0.53 --dport 53 --reply-src 10.244.1.10',
  ]);
  assert.deepEqual(conntrack.flows, [flow('10.244.2.10')]);
  assert.deepEqual(
    outcome.conntrack.map((r) => [r.family, r.deleted]),
    [['IPv4', 1]],
  );
});

test('with the changed keys, only the changed UDP ports are reconciled', async () => {
  const nft = new RecordingNftRunner();
  const conntrack = new FakeConntrack();
  const dp = new NftablesDataplane({ nft, commands: conntrack });
  const other = (...ips: string[]) =>
    servicePort('other', {
      clusterIP: '10.96.0.54',
      protocol: 'UDP',
      port: 53,
      clusterEndpoints: ips.map((ip) => endpoint(ip, 5353)),
    });
  await dp.sync(ipv4([dns('10.244.1.10', '10.244.2.10'), other('10.244.3.10')]), 'full');
  // Flows made since: one to the endpoint about to go, one to an endpoint of the unchanged port
  // that (were it judged) would look stale.
  conntrack.flows = [
    { origDst: '10.96.0.53', dport: 53, replySrc: '10.244.1.10' },
    { origDst: '10.96.0.54', dport: 53, replySrc: '10.244.9.9' },
  ];
  await dp.sync(
    ipv4([dns('10.244.2.10'), other('10.244.3.10')]),
    'incremental',
    new Set(['default/dns:53/UDP']),
  );
  assert.deepEqual(conntrack.deletions(), [
    'conntrack -D -f ipv4 -p udp --orig-dst 10.96.0.53 --dport 53 --reply-src 10.244.1.10',
  ]);
  assert.equal(
    (await dp.sync(ipv4([dns('10.244.2.10'), other('10.244.3.10')]), 'incremental', new Set())).conntrack
      .length,
    0,
  );
});

test('cleanup removes the kproxy tables that exist and nothing else, and says which', async () => {
  const nft = new FakeNft();
  const dp = new NftablesDataplane({ nft, commands: new RecordingCommandRunner() });
  await nft.run('add table ip other\n');
  await dp.sync(ipv4([web('10.244.1.10')]), 'full');
  assert.deepEqual(await dp.cleanup(), ['nft table ip kproxy']);
  assert.deepEqual([...nft.ruleset.tables.keys()], ['ip other']);
  // Nothing left of ours: nothing is created to be deleted, nothing reported.
  const scripts = nft.scripts.length;
  assert.deepEqual(await dp.cleanup(), []);
  assert.equal(nft.scripts.length, scripts);
});
