import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
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

test('start() adopts an earlier table: the first full sync is a diff that keeps existing elements', async () => {
  const { nft, dp } = dataplane();
  nft.tables.ip = {
    nftables: [
      { metainfo: { version: '1.0.6' } },
      { table: { family: 'ip', name: 'kproxy', handle: 1 } },
      { chain: { family: 'ip', table: 'kproxy', name: 'cluster-ip', handle: 2 } },
      { chain: { family: 'ip', table: 'kproxy', name: 'backends-tcp-1', handle: 3 } },
      { chain: { family: 'ip', table: 'kproxy', name: 'backends-tcp-7', handle: 4 } },
      {
        map: {
          family: 'ip',
          name: 'backends-tcp',
          table: 'kproxy',
          elem: [[{ concat: ['10.96.0.10', 80, 0] }, { concat: ['10.244.1.10', 8080] }]],
        },
      },
      {
        map: {
          family: 'ip',
          name: 'service-ips',
          table: 'kproxy',
          elem: [
            [
              { elem: { val: { concat: ['10.96.0.10', 'tcp', 80] }, comment: 'default/web:80/TCP' } },
              { goto: { target: 'cluster-ip' } },
            ],
          ],
        },
      },
      {
        set: {
          family: 'ip',
          name: 'affinity-x',
          table: 'kproxy',
          flags: ['dynamic', 'timeout'],
          elem: ['1.2.3.4'],
        },
      },
    ],
  };
  await dp.start();
  const outcome = await dp.sync(ipv4([web('10.244.1.10')]), 'full');
  assert.equal(outcome.kind, 'full');
  const script = nft.scripts[0]!;
  assert.ok(!isFull(script), 'no table replaced');
  assert.doesNotMatch(script, /element ip kproxy (backends-tcp|service-ips) /, 'adopted elements are kept');
  assert.match(script, /^flush chain ip kproxy cluster-ip$/m, 'adopted chains are rewritten');
  assert.match(script, /^delete chain ip kproxy backends-tcp-7$/m, 'chains no longer used are deleted');
  assert.match(script, /^delete set ip kproxy affinity-x$/m);
  assert.match(script, /^add map ip kproxy service-nodeports /m, 'missing maps are created');
  assert.equal((await dp.sync(ipv4([web('10.244.1.10')]), 'incremental')).kind, 'incremental');
});

test('a removed UDP endpoint has its conntrack flows deleted after the sync', async () => {
  const { commands, dp } = dataplane();
  await dp.sync(ipv4([dns('10.244.1.10', '10.244.2.10')]), 'full');
  commands.calls.length = 0;
  const outcome = await dp.sync(ipv4([dns('10.244.2.10')]), 'incremental');
  assert.deepEqual(commands.calls, [
    [
      'conntrack',
      '-D',
      '-p',
      'udp',
      '--orig-dst',
      '10.96.0.53',
      '--dport',
      '53',
      '--reply-src',
      '10.244.1.10',
    ],
  ]);
  assert.equal(outcome.conntrackEntriesDeleted, 1);
});

test('with the changed keys, a removed UDP endpoint of a changed port still has its flows deleted', async () => {
  const { commands, dp } = dataplane();
  const other = (...ips: string[]) =>
    servicePort('other', {
      clusterIP: '10.96.0.54',
      protocol: 'UDP',
      port: 53,
      clusterEndpoints: ips.map((ip) => endpoint(ip, 5353)),
    });
  await dp.sync(ipv4([dns('10.244.1.10', '10.244.2.10'), other('10.244.3.10')]), 'full');
  commands.calls.length = 0;
  await dp.sync(
    ipv4([dns('10.244.2.10'), other('10.244.3.10')]),
    'incremental',
    new Set(['default/dns:53/UDP']),
  );
  assert.deepEqual(
    commands.calls.map((call) => call.join(' ')),
    ['conntrack -D -p udp --orig-dst 10.96.0.53 --dport 53 --reply-src 10.244.1.10'],
  );
});

test('cleanup removes both kproxy tables and nothing else', async () => {
  const { nft, dp } = dataplane();
  await dp.cleanup();
  assert.equal(
    nft.scripts[0],
    'add table ip kproxy\ndelete table ip kproxy\nadd table ip6 kproxy\ndelete table ip6 kproxy\n',
  );
});
