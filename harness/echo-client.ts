// Client for the echo server, run inside a client namespace:
//   node harness/echo-client.ts tcp|udp HOST PORT [--count N] [--timeout MS] [--source IP]
//   node harness/echo-client.ts tcp|udp HOST PORT --hold [--tick MS]
//   node harness/echo-client.ts --serve
// Makes N sequential connections (or datagrams, each from a new socket) and prints one JSON line per
// attempt: the server's EchoReply, or {"error":"ECONNREFUSED"|"timeout"|...} — so a test counts
// which backends answered and sees refusals and drops, all from one process start.
// --hold keeps ONE TCP connection: it prints the greeting, then sends "tick N" every 100 ms (or --tick) and
// prints {"echo":"tick N"} per echoed line, or {"error":...} once the connection breaks. With udp it
// keeps ONE socket (one flow: the same source port throughout), sends "tick N" every 100 ms and
// prints each answer, the server's reply line, so a test sees which backend answered each tick.
// --serve stays up and takes probes as JSON lines on stdin (a ProbeRequest each), answering each with
// one line {"id":N,"outcomes":[...]}: one long-lived process per namespace instead of a node start per
// probe (seconds each under the VM's emulation). Probes run concurrently, attempts within one in turn.
import { createSocket } from 'node:dgram';
import { flushCompileCache } from 'node:module';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

export type EchoOutcome =
  | { readonly name: string; readonly peer: string; readonly port: number }
  | { readonly error: string };

function firstLine(data: string): string | undefined {
  const end = data.indexOf('\n');
  return end < 0 ? undefined : data.slice(0, end);
}

function tcpOnce(host: string, port: number, timeoutMs: number, source?: string): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    const socket = connect({ host, port, localAddress: source });
    socket.setEncoding('utf8');
    const done = (out: string): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(out);
    };
    const timer = setTimeout(() => done(JSON.stringify({ error: 'timeout' })), timeoutMs);
    socket.on('data', (chunk: string) => {
      data += chunk;
      const l = firstLine(data);
      if (l !== undefined) done(l);
    });
    socket.on('error', (err: NodeJS.ErrnoException) =>
      done(JSON.stringify({ error: err.code ?? err.message })),
    );
    socket.on('end', () => done(JSON.stringify({ error: 'closed' })));
  });
}

function udpOnce(host: string, port: number, timeoutMs: number, source?: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    const done = (out: string): void => {
      clearTimeout(timer);
      socket.close();
      resolve(out);
    };
    const timer = setTimeout(() => done(JSON.stringify({ error: 'timeout' })), timeoutMs);
    socket.on('message', (msg) =>
      done(firstLine(msg.toString('utf8')) ?? JSON.stringify({ error: 'garbled' })),
    );
    socket.on('error', (err: NodeJS.ErrnoException) =>
      done(JSON.stringify({ error: err.code ?? err.message })),
    );
    socket.bind({ address: source, port: 0 }, () => socket.send('ping\n', port, host));
  });
}

/** How often a held connection (--hold) sends a tick. */
export const HOLD_TICK_MS = 100;

function hold(host: string, port: number, tickMs: number): void {
  const socket = connect({ host, port });
  socket.setEncoding('utf8');
  let buffered = '';
  let greeted = false;
  let tick = 0;
  const timer = setInterval(() => socket.write(`tick ${tick++}\n`), tickMs);
  const fail = (error: string): void => {
    clearInterval(timer);
    process.stdout.write(`${JSON.stringify({ error })}\n`);
    process.exit(1);
  };
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      process.stdout.write(`${greeted ? JSON.stringify({ echo: line }) : line}\n`);
      greeted = true;
    }
  });
  socket.on('error', (err: NodeJS.ErrnoException) => fail(err.code ?? err.message));
  socket.on('end', () => fail('closed'));
}

function holdUdp(host: string, port: number, tickMs: number): void {
  const socket = createSocket(host.includes(':') ? 'udp6' : 'udp4');
  let tick = 0;
  socket.on('message', (msg) =>
    process.stdout.write(`${firstLine(msg.toString('utf8')) ?? JSON.stringify({ error: 'garbled' })}\n`),
  );
  socket.on('error', (err: NodeJS.ErrnoException) => {
    process.stdout.write(`${JSON.stringify({ error: err.code ?? err.message })}\n`);
    process.exit(1);
  });
  socket.bind(0, () => setInterval(() => socket.send(`tick ${tick++}\n`, port, host), tickMs));
}

/** One probe for --serve: `count` attempts, each bounded by `timeoutMs`. */
export interface ProbeRequest {
  readonly id: number;
  readonly proto: 'tcp' | 'udp';
  readonly host: string;
  readonly port: number;
  readonly count: number;
  readonly timeoutMs: number;
  readonly source?: string;
}

/** The attempts' outcomes as they come, one JSON text each (the server's reply line, or an error). */
async function* attempts(probe: Omit<ProbeRequest, 'id'>): AsyncGenerator<string> {
  const once = probe.proto === 'tcp' ? tcpOnce : udpOnce;
  for (let i = 0; i < probe.count; i++)
    yield await once(probe.host, probe.port, probe.timeoutMs, probe.source);
}

async function answer(probe: ProbeRequest): Promise<void> {
  const lines: string[] = [];
  for await (const line of attempts(probe)) lines.push(line);
  process.stdout.write(`{"id":${probe.id},"outcomes":[${lines.join(',')}]}\n`);
}

function serve(): void {
  const input = createInterface({ input: process.stdin });
  // Ends by itself once stdin closes and the probes in flight are answered.
  input.on('line', (line) => void answer(JSON.parse(line) as ProbeRequest));
  // Up (probes wait for this): a probe's deadline need not hold a node start on a busy machine.
  process.stdout.write('{"ready":true}\n');
}

async function main(): Promise<void> {
  // Tests end it with a signal, and a killed node never writes its compile cache (NODE_COMPILE_CACHE):
  // write it now, or each start in the qemu VM strips the TypeScript again (a cold start took 2-3× a warm one there).
  flushCompileCache();
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      count: { type: 'string', default: '1' },
      timeout: { type: 'string', default: '1000' },
      source: { type: 'string' },
      hold: { type: 'boolean', default: false },
      tick: { type: 'string', default: String(HOLD_TICK_MS) },
      serve: { type: 'boolean', default: false },
    },
  });
  if (values.serve) {
    serve();
    return;
  }
  const [proto, host, port] = positionals;
  if ((proto !== 'tcp' && proto !== 'udp') || !host || !port) {
    throw new Error('usage: echo-client.ts tcp|udp HOST PORT [--count N] [--timeout MS] [--source IP]');
  }
  if (values.hold) {
    (proto === 'tcp' ? hold : holdUdp)(host, Number(port), Number(values.tick));
    return;
  }
  const probe: Omit<ProbeRequest, 'id'> = {
    proto,
    host,
    port: Number(port),
    count: Number(values.count),
    timeoutMs: Number(values.timeout),
    source: values.source,
  };
  for await (const line of attempts(probe)) process.stdout.write(`${line}\n`);
}

if (import.meta.main) await main();
