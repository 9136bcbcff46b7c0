// A /healthz prober on a thread of its own (healthz-prober.ts starts it), so it keeps probing
// while the test's main thread, which hosts the listener's owner, is blocked. One request at a
// time, each recorded with the monotonic clock all of the process's threads share.
import http from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';

const { url, stop } = workerData as { url: string; stop: SharedArrayBuffer };
const stopped = new Int32Array(stop);
const agent = new http.Agent({ keepAlive: true });
const answers: [sentNs: bigint, receivedNs: bigint, status: number][] = [];

function probe(): Promise<void> {
  return new Promise((resolve, reject) => {
    const sent = process.hrtime.bigint();
    http
      .get(url, { agent }, (response) => {
        response.resume();
        response.once('end', () => {
          answers.push([sent, process.hrtime.bigint(), response.statusCode ?? 0]);
          resolve();
        });
      })
      .once('error', reject);
  });
}

while (Atomics.load(stopped, 0) === 0) {
  await probe();
  // The first answer says the prober is up.
  if (answers.length === 1) parentPort!.postMessage('probing');
}
agent.destroy();
parentPort!.postMessage(answers);
