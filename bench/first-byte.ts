// New connections through a NodePort, measured to the backend's first byte (the echo server greets
// each connection), so a userspace relay's second connection counts, not just the local handshake:
//   node bench/first-byte.ts HOST PORT latency COUNT      sequential: p50/p90/p99 in µs
//   node bench/first-byte.ts HOST PORT rate SECONDS IN_FLIGHT   connections/s with IN_FLIGHT open at once
// Each connection is reset once the byte came, so no TIME_WAIT piles up. Prints one JSON line.
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { median, percentile, round } from './measure.ts';

const [host, port, mode, amount, inFlight = '1'] = process.argv.slice(2);
if (
  host === undefined ||
  port === undefined ||
  (mode !== 'latency' && mode !== 'rate') ||
  amount === undefined
) {
  console.error('usage: first-byte.ts HOST PORT latency COUNT | HOST PORT rate SECONDS IN_FLIGHT');
  process.exit(2);
}

function firstByte(): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const socket = connect({ host, port: Number(port) });
    socket.setTimeout(5000, () => socket.destroy(new Error('no first byte within 5 s')));
    socket.once('data', () => {
      const micros = (performance.now() - start) * 1000;
      socket.resetAndDestroy();
      resolve(micros);
    });
    socket.once('error', reject);
  });
}

// Warm-up: the JIT, the backend's accept path and the relay's.
for (let i = 0; i < 200; i++) await firstByte();
if (mode === 'latency') {
  const times: number[] = [];
  for (let i = 0; i < Number(amount); i++) times.push(await firstByte());
  console.log(
    JSON.stringify({
      count: times.length,
      p50Us: round(median(times)),
      p90Us: round(percentile(times, 90)),
      p99Us: round(percentile(times, 99)),
    }),
  );
} else {
  const until = performance.now() + Number(amount) * 1000;
  let done = 0;
  const worker = async () => {
    while (performance.now() < until) {
      await firstByte();
      done++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: Number(inFlight) }, worker));
  const seconds = (performance.now() - started) / 1000;
  console.log(JSON.stringify({ connections: done, perSecond: round(done / seconds) }));
}
