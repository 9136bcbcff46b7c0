// The drain sweep through the live dataplane: what a failed dump of a service's real servers does
// to the record of its draining ones (draining-servers.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IpvsError } from '../../../dataplanes/ipvs/ipvs-client.ts';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import type { VirtualService } from '../../../dataplanes/ipvs/virtual-servers.ts';
import { endpoint, ipv4, localEndpoint, servicePort } from '../../../harness/proxy-states.ts';
import { FakeKernel } from './fake-kernel.ts';

const a = endpoint('10.244.2.10');
const b = localEndpoint('10.244.1.10');
const web = (eps = [a, b]) => ipv4([servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: eps })]);
const DRAINING_A = 'TCP 10.96.0.10:80 -> 10.244.2.10:8080 w=0';

/** A dataplane whose next dump of real servers fails with `failure`; a is draining, with a connection. */
async function drainingWhileADumpFails(failure: Error) {
  const kernel = new FakeKernel();
  const client = kernel.client();
  let failNextDump = false;
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => ({
      ...client,
      listServers: async (service: VirtualService) => {
        if (!failNextDump) return client.listServers(service);
        failNextDump = false;
        throw failure;
      },
    }),
  });
  await dp.start();
  await dp.sync(web(), 'full');
  kernel.setConnections('TCP 10.96.0.10:80', '10.244.2.10:8080', 1, 0);
  assert.equal((await dp.sync(web([b]), 'incremental')).kind, 'incremental');
  assert.ok(kernel.ipvs().includes(DRAINING_A));
  // Its connection ends; the next sweep's dump fails.
  kernel.setConnections('TCP 10.96.0.10:80', '10.244.2.10:8080', 0, 0);
  failNextDump = true;
  return { kernel, dp };
}

for (const failure of [
  new IpvsError('other', 'IPVS list servers: Request rejected: ENOMEM'),
  new IpvsError('timeout', 'IPVS list servers: no answer in 10000 ms'),
]) {
  test(`a dump the kernel ${failure.code === 'timeout' ? 'leaves unanswered' : 'refuses'} keeps the service's draining server, deleted by the next sweep once idle`, async () => {
    const { kernel, dp } = await drainingWhileADumpFails(failure);
    assert.equal((await dp.sync(web([b]), 'incremental')).kind, 'incremental');
    assert.ok(kernel.ipvs().includes(DRAINING_A), 'not swept: its connections are not known');
    assert.equal(dp.draining, 1, 'still recorded as draining');
    await dp.sync(web([b]), 'incremental');
    assert.ok(!kernel.ipvs().some((l) => l.includes('-> 10.244.2.10')), 'idle: deleted');
    assert.equal(dp.draining, 0);
  });
}

test('a bug while sweeping fails the sync instead of forgetting the draining server', async () => {
  const bug = new TypeError("Cannot read properties of undefined (reading 'readUInt32BE')");
  const { kernel, dp } = await drainingWhileADumpFails(bug);
  await assert.rejects(dp.sync(web([b]), 'incremental'), (error) => error === bug);
  assert.equal(dp.draining, 1);
  await dp.sync(web([b]), 'full');
  assert.ok(!kernel.ipvs().some((l) => l.includes('-> 10.244.2.10')), 'idle: deleted');
});

test("a service gone from the kernel (its dump refused: ENOENT) takes its draining servers' record with it", async () => {
  const kernel = new FakeKernel();
  const dp = new IpvsDataplane({ runner: kernel.runner(), openClient: async () => kernel.client() });
  await dp.start();
  await dp.sync(web(), 'full');
  kernel.setConnections('TCP 10.96.0.10:80', '10.244.2.10:8080', 1, 0);
  await dp.sync(web([b]), 'incremental');
  assert.equal(dp.draining, 1);
  kernel.services.delete('TCP 10.96.0.10:80');
  await dp.sync(web([b]), 'incremental');
  assert.equal(dp.draining, 0);
});
