// The health listener's thread (health-listener.ts starts it): owns the /healthz listener's socket
// and answers from the shared state the main thread publishes, so a probe is answered in
// microseconds whatever the main thread is doing. The listener is the same http-listener.ts the
// other ports use (refusals, limits, timeouts); its counts go to shared memory for the metrics.
import { parentPort, workerData } from 'node:worker_threads';
import { HEALTH_HEADERS, healthAnswer, NOT_FOUND_HEADERS } from './health-answer.ts';
import type { HealthListenerData, HealthListenerRefusal, HealthListenerStart } from './health-listener.ts';
import { HealthListenerCounts } from './health-listener-counts.ts';
import { SharedHealthState } from './health-shared-state.ts';
import { type HttpListener, listenHttp } from './http-listener.ts';
import { heapCollector } from './release-memory.ts';

const data = workerData as HealthListenerData;
const port = parentPort!;
const state = new SharedHealthState(data.state);
const counts = new HealthListenerCounts(data.counts);
const post = (message: HealthListenerStart | HealthListenerRefusal) => port.postMessage(message);

const gc = heapCollector();
let requests = 0;
/** Counts a request; once the response is sent, collects when `requestsPerCollection` were. */
const counted = () => {
  if (++requests < data.requestsPerCollection) return;
  requests = 0;
  setImmediate(() => gc({ type: 'major', execution: 'sync' }));
};

let listener: HttpListener;
try {
  listener = await listenHttp(
    data.host,
    data.port,
    (path, response) => {
      counted();
      const view = { ...state.read(), stalled: state.silentForMs() >= data.stalledAfterMs };
      const answer = healthAnswer(path, view, Date.now());
      if (answer.path === undefined) {
        response.writeHead(answer.status, NOT_FOUND_HEADERS).end(answer.body);
        return;
      }
      counts.answered(answer.path, answer.status);
      response.writeHead(answer.status, HEALTH_HEADERS).end(answer.body);
    },
    {
      onRefused: (refusal) => {
        counted();
        counts.refused(refusal.reason);
        if (data.logRefusals) post({ type: 'refused', refusal });
      },
    },
  );
  post({ type: 'listening', port: listener.port, url: listener.url });
  // The listener keeps this thread alive from here on; its close ends it.
  port.unref();
  port.once('message', () => void listener.close());
} catch (error) {
  const { code, message } = error as NodeJS.ErrnoException;
  post({ type: 'failed', code: code ?? message });
  port.close();
}
