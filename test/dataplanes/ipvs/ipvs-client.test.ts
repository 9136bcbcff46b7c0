// The IPVS netlink client against a generic-netlink socket scripted like the kernel (the real
// socket is exercised in the VM tests): commands sent together, each refusal its own error, the
// bound on unanswered requests.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DataplaneError } from '../../../contract/dataplane-error.ts';
import { IpvsError, NetlinkIpvsClient } from '../../../dataplanes/ipvs/ipvs-client.ts';
import { IPVS_CMD } from '../../../dataplanes/ipvs/ipvs-messages.ts';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import { allowance } from '../../../harness/emulation.ts';
import { ipv4, localEndpoint, servicePort } from '../../../harness/proxy-states.ts';
import { FakeKernel } from './fake-kernel.ts';
import { scriptedNetlink } from './scripted-netlink.ts';

// What is asserted is that the request fails, not when; the bound is also what answered requests
// (the scripted socket answers in the next turn of the event loop) must beat. At 50 ms one failed at
// load 16: a process descheduled past the bound wakes to its timer before the answer's turn. A
// second at the design load, stretched on a busier machine, costs the two unanswered tests ~2 s.
const BOUND_MS = Math.round(allowance(1_000));

test('a netlink request the kernel never answers fails with a DataplaneError after the bound', async () => {
  const { socket, log } = scriptedNetlink();
  const client = await NetlinkIpvsClient.open({ createSocket: () => socket, requestTimeoutMs: BOUND_MS });
  assert.deepEqual(await client.listServices(), []);
  log.silent = true;
  await assert.rejects(client.listServices(), (err) => {
    assert.ok(err instanceof IpvsError && err instanceof DataplaneError);
    assert.equal(err.code, 'timeout');
    assert.match(err.message, new RegExp(`list services: no answer from the kernel within ${BOUND_MS} ms`));
    return true;
  });
});

test('an unanswered family lookup fails the open and closes the socket', async () => {
  const { socket, log } = scriptedNetlink();
  log.silent = true;
  await assert.rejects(
    NetlinkIpvsClient.open({ createSocket: () => socket, requestTimeoutMs: BOUND_MS }),
    (err) => err instanceof IpvsError && err.code === 'timeout',
  );
  assert.equal(log.closed, 1);
});

test('a sync whose netlink request goes unanswered fails, and the next one uses a fresh socket', async () => {
  const kernel = new FakeKernel();
  const sockets: ReturnType<typeof scriptedNetlink>[] = [];
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: () => {
      sockets.push(scriptedNetlink());
      return NetlinkIpvsClient.open({
        createSocket: () => sockets.at(-1)!.socket,
        requestTimeoutMs: BOUND_MS,
      });
    },
  });
  await dp.start();
  sockets[0]!.log.silent = true;
  const state = ipv4([
    servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: [localEndpoint('10.244.1.10')] }),
  ]);
  await assert.rejects(dp.sync(state, 'full'), (err) => err instanceof IpvsError && err.code === 'timeout');
  assert.equal(sockets[0]!.log.closed, 1, 'the unanswering socket is closed');
  // The stub answers every request of the new socket: the retry goes through.
  assert.equal((await dp.sync(state, 'full')).kind, 'full');
  assert.equal(sockets.length, 2);
  assert.ok(sockets[1]!.log.commands.length > 0);
});

test('commands sent together go in one datagram, in order, and each refusal names its own command', async () => {
  const web = { family: 'IPv4', protocol: 'TCP', address: '10.96.0.10', port: 80, scheduler: 'rr' } as const;
  const service = { ...web, persistenceTimeout: 0, schedulerFlags: [] };
  const server = (i: number) => ({ address: `10.244.1.${i}`, port: 8080, weight: 1 });
  // The kernel refuses the second and the fourth command (by their sequence numbers).
  let first = 0;
  const { socket, log } = scriptedNetlink((m) => {
    first ||= m.seq;
    return m.seq === first + 1 ? 17 : m.seq === first + 3 ? 2 : 0;
  });
  const client = await NetlinkIpvsClient.open({ createSocket: () => socket });
  const refused = await client.send([
    { op: 'add-service', service },
    { op: 'add-server', service, server: server(1) },
    { op: 'add-server', service, server: server(2) },
    { op: 'delete-server', service, server: server(3) },
    { op: 'edit-server', service, server: server(4) },
  ]);
  assert.deepEqual(log.datagrams, [1, 5], 'the family lookup, then the five commands in one datagram');
  assert.deepEqual(
    log.commands.map((m) => m.cmd),
    [IPVS_CMD.NEW_SERVICE, IPVS_CMD.NEW_DEST, IPVS_CMD.NEW_DEST, IPVS_CMD.DEL_DEST, IPVS_CMD.SET_DEST],
  );
  assert.deepEqual(
    log.commands.map((m) => m.seq - first),
    [0, 1, 2, 3, 4],
    'each message its own sequence number',
  );
  // Only the last asks for an acknowledgement: the kernel answers the others only to refuse them.
  assert.deepEqual(
    log.commands.map((m) => m.flags & 0x4),
    [0, 0, 0, 0, 4],
  );
  assert.ok(log.commands.every((m) => m.body.length > 0));
  assert.deepEqual(
    [...refused].map(([i, err]) => [i, err.code, err.message]),
    [
      [1, 'EEXIST', 'IPVS add server TCP 10.96.0.10:80 -> 10.244.1.1:8080: Request rejected: EEXIST'],
      [3, 'ENOENT', 'IPVS delete server TCP 10.96.0.10:80 -> 10.244.1.3:8080: Request rejected: ENOENT'],
    ],
  );
  assert.equal(log.unanswered, 0);
  // One command alone throws its refusal.
  const { socket: refusing } = scriptedNetlink(() => 17);
  const single = await NetlinkIpvsClient.open({ createSocket: () => refusing });
  await assert.rejects(
    single.addService(service),
    /IPVS add service TCP 10\.96\.0\.10:80: Request rejected: EEXIST/,
  );
});
