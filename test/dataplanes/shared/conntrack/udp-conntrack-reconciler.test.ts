// When the reconciler runs, what it asks conntrack, and how it survives a failing conntrack.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState, ServicePort } from '../../../../contract/proxy-state.ts';
import { UdpConntrackReconciler } from '../../../../dataplanes/shared/conntrack/udp-conntrack-reconciler.ts';
import { endpoint, proxyState, servicePort } from '../../../../harness/proxy-states.ts';
import { FakeConntrack } from './fake-conntrack.ts';

const dns = (...ips: string[]) =>
  servicePort('dns', {
    clusterIP: '10.96.0.53',
    protocol: 'UDP',
    port: 53,
    clusterEndpoints: ips.map((ip) => endpoint(ip, 5353)),
  });
const web = (...ips: string[]) =>
  servicePort('web', { clusterIP: '10.96.0.80', clusterEndpoints: ips.map((ip) => endpoint(ip)) });
const v4 = (...ports: ServicePort[]): DualStackState => ({ IPv4: proxyState('IPv4', ports) });

const flowsTo = (...replySrcs: string[]) =>
  replySrcs.map((replySrc) => ({ origDst: '10.96.0.53', dport: 53, replySrc }));

test('at start-up only flows to endpoints that no longer serve go; healthy flows stay (kubernetes#122740)', async () => {
  const conntrack = new FakeConntrack(flowsTo('10.244.1.10', '10.244.1.10', '10.244.2.10'));
  const results = await new UdpConntrackReconciler(conntrack).afterSync(v4(dns('10.244.2.10')), 'full');
  assert.deepEqual(conntrack.deletions(), [
    'conntrack -D -f ipv4 -p udp --orig-dst 10.96.0.53 --dport 53 --reply-src 10.244.1.10',
  ]);
  assert.deepEqual(conntrack.flows, flowsTo('10.244.2.10'));
  assert.deepEqual(
    results.map(({ family, deleted, unparsed }) => ({ family, deleted, unparsed })),
    [{ family: 'IPv4', deleted: 2, unparsed: 0 }],
  );
});

test('an incremental sync that changed no UDP service port does not touch conntrack', async () => {
  const conntrack = new FakeConntrack(flowsTo('10.244.1.10'));
  const reconciler = new UdpConntrackReconciler(conntrack);
  await reconciler.afterSync(v4(dns('10.244.1.10'), web('10.244.1.20')), 'full');
  conntrack.calls.length = 0;
  const results = await reconciler.afterSync(v4(dns('10.244.1.10'), web('10.244.1.21')), 'incremental');
  assert.deepEqual(results, []);
  assert.deepEqual(conntrack.calls, []);
  // Told the changed ports, it believes them (the sync step knows them without comparing).
  await reconciler.afterSync(
    v4(dns('10.244.1.11'), web('10.244.1.21')),
    'incremental',
    new Set(['default/web:80/TCP']),
  );
  assert.deepEqual(conntrack.calls, []);
});

test('an incremental UDP change lists once and deletes the gone endpoint only; a full sync always reconciles', async () => {
  const conntrack = new FakeConntrack(flowsTo('10.244.1.10', '10.244.2.10'));
  const reconciler = new UdpConntrackReconciler(conntrack);
  await reconciler.afterSync(v4(dns('10.244.1.10', '10.244.2.10')), 'full');
  assert.deepEqual(conntrack.deletions(), []);
  await reconciler.afterSync(v4(dns('10.244.2.10')), 'incremental', new Set(['default/dns:53/UDP']));
  assert.deepEqual(conntrack.calls.slice(1), [
    'conntrack -L -f ipv4 -p udp -o extended',
    'conntrack -D -f ipv4 -p udp --orig-dst 10.96.0.53 --dport 53 --reply-src 10.244.1.10',
  ]);
  conntrack.calls.length = 0;
  await reconciler.afterSync(v4(dns('10.244.2.10')), 'full');
  assert.deepEqual(conntrack.calls, ['conntrack -L -f ipv4 -p udp -o extended']);
});

test('a failed conntrack is logged once, not thrown, and the next sync catches up with what it missed', async () => {
  const conntrack = new FakeConntrack(flowsTo('10.244.1.10'));
  const logged: string[] = [];
  const reconciler = new UdpConntrackReconciler(conntrack, (message) => logged.push(message));
  await reconciler.afterSync(v4(dns('10.244.1.10'), web('10.244.1.20')), 'full');
  conntrack.failWith = 'conntrack v1.4.7 (conntrack-tools): Operation failed: Permission denied\n';
  // The service is deleted during the failure...
  assert.deepEqual(await reconciler.afterSync(v4(web('10.244.1.20')), 'incremental'), []);
  assert.deepEqual(await reconciler.afterSync(v4(web('10.244.1.21')), 'incremental'), []);
  assert.equal(logged.filter((m) => m.includes('not reconciled')).length, 1);
  conntrack.failWith = undefined;
  // ...and its flows still go once conntrack answers, though this sync changed no UDP port.
  await reconciler.afterSync(v4(web('10.244.1.22')), 'incremental', new Set(['default/web:80/TCP']));
  assert.deepEqual(conntrack.deletions().slice(-1), [
    'conntrack -D -f ipv4 -p udp --orig-dst 10.96.0.53 --dport 53 --reply-src 10.244.1.10',
  ]);
  assert.deepEqual(conntrack.flows, []);
});

test('each family is listed and deleted with its own -f; a node without UDP service ports lists nothing', async () => {
  const dns6 = servicePort('dns', {
    clusterIP: 'fd00:96::53',
    protocol: 'UDP',
    port: 53,
    clusterEndpoints: [endpoint('fd00:244:1::11', 5353)],
  });
  const conntrack = new FakeConntrack([
    ...flowsTo('10.244.2.10'),
    { origDst: 'fd00:96::53', dport: 53, replySrc: 'fd00:244:1::10' },
  ]);
  const state = { IPv4: proxyState('IPv4', [dns('10.244.2.10')]), IPv6: proxyState('IPv6', [dns6]) };
  const results = await new UdpConntrackReconciler(conntrack).afterSync(state, 'full');
  assert.deepEqual(conntrack.deletions(), [
    'conntrack -D -f ipv6 -p udp --orig-dst fd00:96::53 --dport 53 --reply-src fd00:244:1::10',
  ]);
  assert.deepEqual(
    results.map((r) => [r.family, r.deleted]),
    [
      ['IPv4', 0],
      ['IPv6', 1],
    ],
  );
  const tcpOnly = new FakeConntrack(flowsTo('10.244.1.10'));
  assert.deepEqual(await new UdpConntrackReconciler(tcpOnly).afterSync(v4(web('10.244.1.20')), 'full'), []);
  assert.deepEqual(tcpOnly.calls, []);
});
