// One small HTTP listener: the health, metrics and health-check-node-port servers all start and
// stop the same way. Listening errors (address in use, bad address) reject the start, so the
// caller can report them; port 0 picks a free port (tests).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_PORT, splitHostPort } from '../cli/host-port.ts';

// Not `import ... from 'node:http'`: the ES module view of node:http reads every export, and its
// WebSocket getter loads Node's bundled undici (~11 MiB of RSS for the daemon's life, unused).
const { createServer } = process.getBuiltinModule('node:http');

export type Handler = (request: IncomingMessage, response: ServerResponse) => void | Promise<void>;

export interface HttpListener {
  /** The port actually bound (differs from the requested one when that was 0). */
  readonly port: number;
  /** Base URL for clients, e.g. http://127.0.0.1:10256. */
  readonly url: string;
  close(): Promise<void>;
}

export async function listenHttp(host: string, port: number, handler: Handler): Promise<HttpListener> {
  const server: Server = createServer((request, response) => {
    Promise.resolve(handler(request, response)).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500, { 'Content-Type': 'text/plain' });
      response.end(`internal error: ${error instanceof Error ? error.message : String(error)}\n`);
    });
  });
  // Probes and scrapes are short; do not let a slow client hold a socket for long.
  server.requestTimeout = 10_000;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' || host === '' ? '127.0.0.1' : host;
  return {
    port: bound,
    url: `http://${urlHost}:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** "0.0.0.0:10256", "[::]:10256", ":10256" (all addresses) → host and port; undefined if malformed. */
export function parseHostPort(text: string): { readonly host: string; readonly port: number } | undefined {
  const parts = splitHostPort(text);
  if (parts === undefined || parts.port > MAX_PORT) return undefined;
  return { host: parts.host || '::', port: parts.port };
}
