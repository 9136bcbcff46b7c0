// Client for the echo server, run inside a client namespace:
//   node harness/echo-client.ts tcp|udp HOST PORT [--count N] [--timeout MS] [--source IP]
//   node harness/echo-client.ts tcp HOST PORT --hold
// Makes N sequential connections (or datagrams, each from a new socket) and prints one JSON line per
// attempt: the server's EchoReply, or {"error":"ECONNREFUSED"|"timeout"|...} — so a test counts
// which backends answered and sees refusals and drops, all from one process start.
// --hold keeps ONE TCP connection: it prints the greeting, then sends "tick N" every 100 ms and
// prints {"echo":"tick N"} per echoed line, or {"error":...} once the connection breaks.
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
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

function hold(host: string, port: number): void {
  const socket = connect({ host, port });
  socket.setEncoding('utf8');
  let buffered = '';
  let greeted = false;
  let tick = 0;
  const timer = setInterval(() => socket.write(`tick ${tick++}\n`), HOLD_TICK_MS);
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

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      count: { type: 'string', default: '1' },
      timeout: { type: 'string', default: '1000' },
      source: { type: 'string' },
      hold: { type: 'boolean', default: false },
    },
  });
  const [proto, host, port] = positionals;
  if ((proto !== 'tcp' && proto !== 'udp') || !host || !port) {
    throw new Error('usage: echo-client.ts tcp|udp HOST PORT [--count N] [--timeout MS] [--source IP]');
  }
  if (values.hold) {
    hold(host, Number(port));
    return;
  }
  const once = proto === 'tcp' ? tcpOnce : udpOnce;
  for (let i = 0; i < Number(values.count); i++) {
    process.stdout.write(`${await once(host, Number(port), Number(values.timeout), values.source)}\n`);
  }
}

if (import.meta.main) await main();
