// Probes a /healthz URL every `--every` ms until SIGTERM, then prints the answers as one JSON line,
// each as [when it was due (epoch ms), latency (ms)], and how many were not 200 (`unhealthy`: the
// daemon said 503, e.g. its main thread stalled past the health timeout, health-heartbeat.ts). Open loop: a probe is sent on schedule even
// while earlier ones wait, and its latency counts from when it was due, so a stalled event loop
// shows in every probe it delays (a closed loop would send one probe per stall and hide it). Run beside the daemon, in its netns.
//   node bench/healthz-probe.ts URL [--every 10]
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { every: { type: 'string', default: '10' } },
});
const url = positionals[0]!;
const every = Number(values.every);
const answers: [number, number][] = [];
let refused = 0;
let unhealthy = 0;
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function probe(): void {
  const due = performance.now();
  const dueAt = Date.now();
  const request = http.get(url, { agent }, (response) => {
    response.resume();
    if (response.statusCode !== 200) unhealthy++;
    response.once('end', () => answers.push([dueAt, Math.round((performance.now() - due) * 10) / 10]));
  });
  // Before the daemon listens: not an answer, and no latency.
  request.once('error', () => refused++);
}

const timer = setInterval(probe, every);
process.stdout.write('probing\n');
process.once('SIGTERM', () => {
  clearInterval(timer);
  agent.destroy();
  // Exit once the line is out: stdout into a pipe may still hold part of a long run's line
  // (minutes of probes are hundreds of KiB), which an exit right after write() drops.
  process.stdout.write(`${JSON.stringify({ answers, refused, unhealthy })}\n`, () => process.exit(0));
});
