// Connection setup latency through the rules, run inside the client namespace:
//   node bench/connect-latency.ts HOST PORT COUNT [WARMUP]
// Each attempt is a new socket (a new conntrack entry, so the first packet walks the nat rules),
// timed from connect() to the handshake, then reset so no TIME_WAIT piles up. Prints one JSON line
// of microseconds.
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { median, percentile, round } from './measure.ts';

const [host, port, count, warmup = '50'] = process.argv.slice(2);
if (host === undefined || port === undefined || count === undefined) {
  console.error('usage: connect-latency.ts HOST PORT COUNT [WARMUP]');
  process.exit(2);
}

function connectOnce(): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const socket = connect({ host, port: Number(port) });
    socket.setTimeout(2000, () => socket.destroy(new Error('connect timed out')));
    socket.once('connect', () => {
      const micros = (performance.now() - start) * 1000;
      socket.resetAndDestroy();
      resolve(micros);
    });
    socket.once('error', reject);
  });
}

for (let i = 0; i < Number(warmup); i++) await connectOnce();
const times: number[] = [];
for (let i = 0; i < Number(count); i++) times.push(await connectOnce());
console.log(
  JSON.stringify({
    count: times.length,
    medianUs: round(median(times)),
    p10Us: round(percentile(times, 10)),
    p90Us: round(percentile(times, 90)),
  }),
);
