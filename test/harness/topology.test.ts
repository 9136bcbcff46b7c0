import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { replies, Topology, tally } from '../../harness/topology.ts';

test('topology: pods on two nodes and the client reach each other with their own source addresses', async (t) => {
  if (!requireRoot(t)) return;
  const lab = new Lab('topo');
  t.after(() => lab.destroy());
  const topo = await Topology.create(lab, { podsPerNode: [2, 1] });
  const [a, b] = topo.nodes[0]!.pods;
  const c = topo.nodes[1]!.pods[0]!;
  await topo.startEcho(b!, { tcp: [8080], udp: [5353] });
  await topo.startEcho(c, { tcp: [8080], udp: [5353] });

  const sameNode = replies(await topo.connect(a!.ns, 'tcp', b!.ipv4, 8080));
  assert.equal(sameNode[0]!.name, b!.name);
  assert.match(sameNode[0]!.peer, new RegExp(`^${a!.ipv4.replaceAll('.', '\\.')}:`));

  const crossNode = replies(await topo.connect(a!.ns, 'udp', c.ipv6, 5353));
  assert.equal(crossNode[0]!.name, c.name);
  assert.ok(crossNode[0]!.peer.startsWith(`[${a!.ipv6}]:`), crossNode[0]!.peer);

  const fromClient = await topo.connect(topo.client.ns, 'tcp', topo.nodes[1]!.ipv4, 8080, { timeoutMs: 500 });
  assert.deepEqual([...tally(fromClient).keys()], ['error:ECONNREFUSED']);
});

test('lab: destroy removes every namespace it created', async (t) => {
  if (!requireRoot(t)) return;
  const lab = new Lab('gone');
  const ns = await lab.addNetns('x');
  const { execa } = await import('execa');
  assert.match((await execa('ip', ['netns', 'list'])).stdout, new RegExp(ns));
  await lab.destroy();
  assert.doesNotMatch((await execa('ip', ['netns', 'list'])).stdout, new RegExp(ns));
});
