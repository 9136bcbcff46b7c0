// The IPVS netlink client's bound on unanswered requests, with a generic-netlink stub in place of
// the kernel (the real socket is exercised in the VM tests).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type GenlSocket, IpvsError, NetlinkIpvsClient } from '../../../dataplanes/ipvs/ipvs-client.ts';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import { DataplaneError } from '../../../dataplanes/shared/dataplane-error.ts';
import { ipv4, localEndpoint, servicePort } from '../../../harness/proxy-states.ts';
import { FakeKernel } from './fake-kernel.ts';

// Short, so the test is quick; what is asserted is that the request fails, not when.
const BOUND_MS = 50;

/** A socket that knows the IPVS family and answers requests with nothing until `silent`. */
function stubSocket(options: { silentFamily?: boolean } = {}) {
  const state = { silent: false, closed: 0, requests: 0 };
  const never = new Promise<never>(() => {});
  const socket = {
    ctrlRequest: async () => (options.silentFamily ? never : [{ familyId: 42 }]),
    request: async () => {
      state.requests += 1;
      return state.silent ? never : [[], {}];
    },
    socket: {
      close() {
        state.closed += 1;
      },
    },
  } as unknown as GenlSocket;
  return { socket, state };
}

test('a netlink request the kernel never answers fails with a DataplaneError after the bound', async () => {
  const { socket, state } = stubSocket();
  const client = await NetlinkIpvsClient.open({ createSocket: () => socket, requestTimeoutMs: BOUND_MS });
  assert.deepEqual(await client.listServices(), []);
  state.silent = true;
  await assert.rejects(client.listServices(), (err) => {
    assert.ok(err instanceof IpvsError && err instanceof DataplaneError);
    assert.equal(err.code, 'timeout');
    assert.match(err.message, /list services: no answer from the kernel within 50 ms/);
    return true;
  });
});

test('an unanswered family lookup fails the open and closes the socket', async () => {
  const { socket, state } = stubSocket({ silentFamily: true });
  await assert.rejects(
    NetlinkIpvsClient.open({ createSocket: () => socket, requestTimeoutMs: BOUND_MS }),
    (err) => err instanceof IpvsError && err.code === 'timeout',
  );
  assert.equal(state.closed, 1);
});

test('a sync whose netlink request goes unanswered fails, and the next one uses a fresh socket', async () => {
  const kernel = new FakeKernel();
  const sockets: ReturnType<typeof stubSocket>[] = [];
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: () => {
      sockets.push(stubSocket());
      return NetlinkIpvsClient.open({
        createSocket: () => sockets.at(-1)!.socket,
        requestTimeoutMs: BOUND_MS,
      });
    },
  });
  await dp.start();
  sockets[0]!.state.silent = true;
  const state = ipv4([
    servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: [localEndpoint('10.244.1.10')] }),
  ]);
  await assert.rejects(dp.sync(state, 'full'), (err) => err instanceof IpvsError && err.code === 'timeout');
  assert.equal(sockets[0]!.state.closed, 1, 'the unanswering socket is closed');
  // The stub answers every request of the new socket: the retry goes through.
  assert.equal((await dp.sync(state, 'full')).kind, 'full');
  assert.equal(sockets.length, 2);
  assert.ok(sockets[1]!.state.requests > 0);
});
