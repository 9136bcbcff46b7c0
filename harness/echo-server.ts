// TCP and UDP echo server for kernel tests, run inside a pod namespace:
//   node harness/echo-server.ts NAME --tcp 80,8080 --udp 53
// Every TCP connection first receives one line `{"name":NAME,"peer":"IP:PORT","port":LOCALPORT}`
// (so a test sees which backend answered and the source address it saw), then its own bytes back.
// Every UDP datagram is answered with that line. Prints "ready" once every port listens.
import { createSocket } from 'node:dgram';
import { flushCompileCache } from 'node:module';
import { createServer } from 'node:net';
import { parseArgs } from 'node:util';

export interface EchoReply {
  readonly name: string;
  /** The client address the server saw, "IP:PORT" (IPv4-mapped IPv6 unwrapped). */
  readonly peer: string;
  readonly port: number;
}

function unmap(ip: string): string {
  return ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
}

function peerOf(ip: string | undefined, port: number | undefined): string {
  const addr = unmap(ip ?? '?');
  return addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`;
}

function line(reply: EchoReply): string {
  return `${JSON.stringify(reply)}\n`;
}

function ports(list: string | undefined): number[] {
  return (list ?? '').split(',').filter(Boolean).map(Number);
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { tcp: { type: 'string' }, udp: { type: 'string' } },
  });
  const name = positionals[0];
  if (!name) throw new Error('usage: echo-server.ts NAME [--tcp P,P] [--udp P,P]');
  const listening: Promise<void>[] = [];
  for (const port of ports(values.tcp)) {
    const server = createServer((socket) => {
      socket.on('error', () => socket.destroy());
      socket.write(line({ name, peer: peerOf(socket.remoteAddress, socket.remotePort), port }));
      socket.pipe(socket);
    });
    listening.push(new Promise((resolve) => server.listen({ port, host: '::' }, resolve)));
  }
  for (const port of ports(values.udp)) {
    const socket = createSocket({ type: 'udp6' });
    socket.on('message', (_msg, rinfo) => {
      socket.send(line({ name, peer: peerOf(rinfo.address, rinfo.port), port }), rinfo.port, rinfo.address);
    });
    listening.push(new Promise((resolve) => socket.bind({ port, address: '::' }, resolve)));
  }
  await Promise.all(listening);
  process.stdout.write('ready\n');
  // Tests end it with a signal, and a killed node never writes its compile cache (NODE_COMPILE_CACHE):
  // write it now, or each start in the qemu VM strips the TypeScript again (a cold start took 2-3× a warm one there).
  flushCompileCache();
}

if (import.meta.main) await main();
