// The sharing index kept across incremental syncs must name exactly the ports holding a piece in
// the state it was last updated to: a port it forgets is a piece built from part of its holders
// (a hairpin element or address deleted while another port still uses it), one it keeps after it
// let go is a port built for nothing or, gone from the state, one that cannot be built.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ServicePort } from '../../../contract/proxy-state.ts';
import { SharingIndex } from '../../../dataplanes/ipvs/sharing-index.ts';
import { endpoint, localEndpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';

const state = (ports: ServicePort[]) => proxyState('IPv4', ports);
const holders = (
  index: SharingIndex,
  pieces: { addresses?: string[]; nodePorts?: number[]; locals?: string[] },
) =>
  [
    ...index.holders(pieces.addresses ?? [], new Map([['TCP', pieces.nodePorts ?? []]]), pieces.locals ?? []),
  ].sort();

test('holders follow each port through updates: shared pieces, one holder left, pieces let go', () => {
  const a = servicePort('a', {
    clusterIP: '10.96.0.1',
    externalIPs: ['192.0.2.1'],
    nodePort: 30001,
    clusterEndpoints: [localEndpoint('10.244.0.5'), endpoint('10.244.1.5')],
  });
  const b = servicePort('b', {
    clusterIP: '10.96.0.2',
    externalIPs: ['192.0.2.1'],
    clusterEndpoints: [localEndpoint('10.244.0.5', 9090)],
  });
  const prev = state([a, b]);
  const index = SharingIndex.of(prev);
  assert.deepEqual(holders(index, { addresses: ['192.0.2.1'] }), [a.key, b.key]);
  assert.deepEqual(holders(index, { locals: ['10.244.0.5'] }), [a.key, b.key]);
  assert.deepEqual(holders(index, { locals: ['10.244.1.5'] }), [], 'not local: no hairpin element');
  assert.deepEqual(holders(index, { nodePorts: [30001], addresses: ['10.96.0.2'] }), [a.key, b.key]);

  // b lets go of the external IP and its endpoint; a loses its node port and gains b's old address.
  const a2 = servicePort('a', { ...a, nodePort: 0, loadBalancerIPs: ['10.96.0.2'] });
  const b2 = servicePort('b', { ...b, externalIPs: [], clusterEndpoints: [] });
  const next = state([a2, b2]);
  index.update(prev, next, [a.key, b.key]);
  assert.deepEqual(holders(index, { addresses: ['192.0.2.1'] }), [a.key]);
  assert.deepEqual(holders(index, { locals: ['10.244.0.5'] }), [a.key]);
  assert.deepEqual(holders(index, { nodePorts: [30001] }), []);
  assert.deepEqual(holders(index, { addresses: ['10.96.0.2'] }), [a.key, b.key]);
  assert.deepEqual(
    [...index.holders(['10.96.0.1', '10.96.0.2', '192.0.2.1'], new Map(), ['10.244.0.5'])].sort(),
    [
      ...SharingIndex.of(next).holders(['10.96.0.1', '10.96.0.2', '192.0.2.1'], new Map(), ['10.244.0.5']),
    ].sort(),
    'the same as an index built from the next state',
  );

  // a goes: its pieces have no holder left but b's own.
  const last = state([b2]);
  index.update(next, last, [a.key]);
  assert.deepEqual(
    holders(index, { addresses: ['192.0.2.1', '10.96.0.1', '10.96.0.2'], locals: ['10.244.0.5'] }),
    [b.key],
  );
});
