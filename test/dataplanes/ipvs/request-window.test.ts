// The IPVS op loop's window of requests in flight, against a scripted generic-netlink socket that
// answers like the kernel (in order, a batch per event-loop turn): the requests go in the plan's
// order, never more than the bound are unanswered, and a refusal fails the sync with that
// request's own error after the requests in flight behind it were answered.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type GenlSocket, IpvsError, NetlinkIpvsClient } from '../../../dataplanes/ipvs/ipvs-client.ts';
import { destMessage, IPVS_CMD, serviceMessage } from '../../../dataplanes/ipvs/ipvs-messages.ts';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import { ipvsDesired } from '../../../dataplanes/ipvs/planner.ts';
import { reconcileServices } from '../../../dataplanes/ipvs/reconcile.ts';
import { IPVS_REQUESTS_IN_FLIGHT, sendInWindow } from '../../../dataplanes/ipvs/request-window.ts';
import { ipv4, localEndpoint, servicePort } from '../../../harness/proxy-states.ts';
import { FakeKernel } from './fake-kernel.ts';

interface Sent {
  readonly cmd: number;
  readonly body: Buffer;
}

/**
 * A socket that answers every command and dump with nothing, all unanswered requests at once, in
 * the order sent, on the next event-loop turn; `refuse` picks the commands it rejects.
 */
function scriptedSocket(refuse: (sent: Sent) => boolean = () => false) {
  const log = { commands: [] as Sent[], unanswered: 0, mostUnanswered: 0 };
  const pending: { sent: Sent; answer: (sent: Sent) => void }[] = [];
  const answerAll = () => {
    for (const { sent, answer } of pending.splice(0)) {
      log.unanswered -= 1;
      answer(sent);
    }
  };
  const socket = {
    ctrlRequest: async () => [{ familyId: 42 }],
    request: (_family: number, cmd: number, _version: number, body: Buffer) =>
      new Promise((resolve, reject) => {
        const sent = { cmd, body };
        if (cmd !== IPVS_CMD.GET_SERVICE && cmd !== IPVS_CMD.GET_DEST) log.commands.push(sent);
        log.unanswered += 1;
        log.mostUnanswered = Math.max(log.mostUnanswered, log.unanswered);
        if (pending.length === 0) setImmediate(answerAll);
        pending.push({
          sent,
          answer: (sent) =>
            refuse(sent) ? reject(new Error('Request rejected: EEXIST')) : resolve([[], {}]),
        });
      }),
    socket: { close() {} },
  } as unknown as GenlSocket;
  return { socket, log };
}

// 30 virtual servers × 3 real servers: 120 commands, nearly two windows.
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

function dataplaneOn(socket: GenlSocket): IpvsDataplane {
  return new IpvsDataplane({
    runner: new FakeKernel().runner(),
    openClient: () => NetlinkIpvsClient.open({ createSocket: () => socket }),
  });
}

test('a full sync sends the plan in order, with the window full but never more unanswered', async () => {
  const { socket, log } = scriptedSocket();
  const dp = dataplaneOn(socket);
  await dp.start();
  assert.equal((await dp.sync(STATE, 'full')).kind, 'full');
  const planned = plannedCommands();
  assert.ok(planned.length > IPVS_REQUESTS_IN_FLIGHT, 'the plan needs more than one window');
  assert.deepEqual(log.commands, planned);
  assert.equal(log.mostUnanswered, IPVS_REQUESTS_IN_FLIGHT);
});

test('a refused request fails the sync with its own error, after the window behind it was answered', async () => {
  const planned = plannedCommands();
  // Two refusals answered in the same batch: the earlier one in the plan is the sync's error.
  const first = 41;
  const refused = new Set([planned[first]!.body.toString('hex'), planned[first + 3]!.body.toString('hex')]);
  let refusing = true;
  const { socket, log } = scriptedSocket((sent) => refusing && refused.has(sent.body.toString('hex')));
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
  // Nothing is sent once the refusal is seen: the window ends with the refused request's.
  assert.equal(log.commands.length, first + IPVS_REQUESTS_IN_FLIGHT);
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
