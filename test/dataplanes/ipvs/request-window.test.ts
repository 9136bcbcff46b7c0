// The IPVS op loop's window of commands in flight, sent several to a datagram, against a socket
// scripted like the kernel (scripted-netlink.ts: each datagram's messages in order, all answers on
// the next event-loop turn): the commands go in the plan's order, in datagrams of
// IPVS_COMMANDS_PER_SEND, never more than the window unanswered, and a refusal fails the sync with
// that command's own error (the first refused in plan order, inside a datagram or across them)
// after the datagrams in flight behind it were answered.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IpvsError, NetlinkIpvsClient } from '../../../dataplanes/ipvs/ipvs-client.ts';
import { destMessage, IPVS_CMD, serviceMessage } from '../../../dataplanes/ipvs/ipvs-messages.ts';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import { ipvsDesired } from '../../../dataplanes/ipvs/planner.ts';
import { reconcileServices } from '../../../dataplanes/ipvs/reconcile.ts';
import {
  IPVS_COMMANDS_PER_SEND,
  IPVS_SENDS_IN_FLIGHT,
  sendInWindow,
} from '../../../dataplanes/ipvs/request-window.ts';
import type { DatagramSocket } from '../../../dataplanes/shared/netlink-socket.ts';
import { ipv4, localEndpoint, servicePort } from '../../../harness/proxy-states.ts';
import { FakeKernel } from './fake-kernel.ts';
import { scriptedNetlink } from './scripted-netlink.ts';

interface Sent {
  readonly cmd: number;
  readonly body: Buffer;
}

const WINDOW = IPVS_COMMANDS_PER_SEND * IPVS_SENDS_IN_FLIGHT;

// 30 virtual servers × 3 real servers: 120 commands, nearly two windows, four datagrams.
const STATE = ipv4(
  Array.from({ length: 30 }, (_, i) =>
    servicePort(`s${i}`, {
      clusterIP: `10.96.0.${i + 1}`,
      clusterEndpoints: [1, 2, 3].map((e) => localEndpoint(`10.244.${i}.${e}`)),
    }),
  ),
);

/** The commands a full sync of STATE on an empty kernel sends, in the plan's order. */
function plannedCommands(): Sent[] {
  const { ops } = reconcileServices(ipvsDesired(STATE, { scheduler: 'rr' }), [], () => false);
  return ops.map((op) => {
    if (op.op === 'add-service') return { cmd: IPVS_CMD.NEW_SERVICE, body: serviceMessage(op.service) };
    if (op.op === 'add-server') return { cmd: IPVS_CMD.NEW_DEST, body: destMessage(op.service, op.server) };
    throw new Error(`unexpected ${op.op} on an empty kernel`);
  });
}

function dataplaneOn(socket: DatagramSocket): IpvsDataplane {
  return new IpvsDataplane({
    runner: new FakeKernel().runner(),
    openClient: () => NetlinkIpvsClient.open({ createSocket: () => socket }),
  });
}

test('a full sync sends the plan in order, in full datagrams, with the window full but never more unanswered', async () => {
  const { socket, log } = scriptedNetlink();
  const dp = dataplaneOn(socket);
  await dp.start();
  assert.equal((await dp.sync(STATE, 'full')).kind, 'full');
  const planned = plannedCommands();
  assert.ok(planned.length > WINDOW, 'the plan needs more than one window');
  assert.deepEqual(
    log.commands.map(({ cmd, body }) => ({ cmd, body })),
    planned,
  );
  // The family lookup, the dumps of start and of the full sync, then the commands.
  assert.deepEqual(log.datagrams, [1, 1, 1, 32, 32, 32, 24]);
  assert.equal(IPVS_COMMANDS_PER_SEND, 32);
  assert.equal(log.mostUnanswered, WINDOW);
});

test('a refused request fails the sync with its own error, after the window behind it was answered', async () => {
  const planned = plannedCommands();
  // Two refusals in the same datagram: the earlier one in the plan is the sync's error.
  const first = 41;
  const refused = new Set([planned[first]!.body.toString('hex'), planned[first + 3]!.body.toString('hex')]);
  let refusing = true;
  const { socket, log } = scriptedNetlink((sent) =>
    refusing && refused.has(sent.body.toString('hex')) ? 17 : 0,
  );
  const dp = dataplaneOn(socket);
  await dp.start();
  await assert.rejects(dp.sync(STATE, 'full'), (err) => {
    assert.ok(err instanceof IpvsError);
    assert.equal(err.code, 'EEXIST');
    // In key order 10.96.0.1:80 comes after 10.96.0.10-19:80 (4 commands each): planned[41] is its
    // first real server, planned[44] the next virtual server.
    assert.match(
      err.message,
      /add server TCP 10\.96\.0\.1:80 -> 10\.244\.0\.1:8080: Request rejected: EEXIST/,
    );
    return true;
  });
  assert.equal(log.unanswered, 0, 'no request is left in flight');
  // Nothing is sent once the refusal is seen: the last datagram is the one sent while the refused
  // one's was in flight (the second datagram holds it; the third went once the first was answered).
  assert.equal(Math.floor(first / IPVS_COMMANDS_PER_SEND), 1);
  assert.equal(log.commands.length, 3 * IPVS_COMMANDS_PER_SEND);
  assert.ok(log.commands.length < planned.length);
  // As before the window: a failed sync leaves nothing committed, so the next one is full.
  refusing = false;
  assert.equal((await dp.sync(STATE, 'incremental')).kind, 'full');
});

test('the window starts nothing after a failure it has seen and reports the first failure in order', async () => {
  const started: number[] = [];
  const answers = new Map<number, PromiseWithResolvers<void>>();
  const run = sendInWindow([0, 1, 2, 3, 4, 5, 6, 7], 3, (item) => {
    started.push(item);
    const answer = Promise.withResolvers<void>();
    answers.set(item, answer);
    return answer.promise;
  });
  await new Promise(setImmediate);
  assert.deepEqual(started, [0, 1, 2], 'three in flight');
  // Item 2 fails before item 1 is answered; item 1's own failure is the one reported.
  answers.get(2)!.reject(new Error('item 2'));
  answers.get(0)!.resolve();
  await new Promise(setImmediate);
  assert.deepEqual(started, [0, 1, 2, 3], 'one more once item 0 was answered');
  answers.get(1)!.reject(new Error('item 1'));
  let settled = false;
  const outcome = run.then(
    () => assert.fail('the window succeeded'),
    (err: Error) => {
      settled = true;
      return err.message;
    },
  );
  await new Promise(setImmediate);
  assert.equal(settled, false, 'item 3 is still in flight');
  answers.get(3)!.resolve();
  assert.equal(await outcome, 'item 1');
  assert.deepEqual(started, [0, 1, 2, 3], 'nothing started after the failure');
});
