// One small HTTP listener: the health, metrics and health-check-node-port servers all start and
// stop the same way. Listening errors (address in use, bad address) reject the start, so the
// caller can report them; port 0 picks a free port (tests).
//
// These ports are open to every pod and peer (/healthz listens on all addresses by default), so
// the listener, not each handler, is what keeps a request from hurting the process: it refuses
// bad methods and targets before a handler sees them, turns a handler's throw (sync or async)
// into a 500, answers the parser's errors itself, and bounds how long and how much a peer can hold.
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { MAX_PORT, splitHostPort } from '../config/host-port.ts';

// Not `import ... from 'node:http'`: the ES module view of node:http reads every export, and its
// WebSocket getter loads Node's bundled undici (~11 MiB of RSS for the daemon's life, unused).
const { createServer } = process.getBuiltinModule('node:http');

/** Answers a request for `path` (decoded, without query); only GET and HEAD get this far. */
export type Handler = (path: string, response: ServerResponse) => void | Promise<void>;

export const REFUSAL_REASONS = [
  'malformed', // 400: the parser or the target check rejected the request
  'too-large', // 414 / 431 / 413: target, headers or chunk extensions over the limits below
  'method', // 405: anything but GET and HEAD
  'timeout', // 408: headers or request not complete in time
  'connection-limit', // dropped at accept: maxConnections open already
  'accept-failed', // the kernel refused the accept (e.g. out of file descriptors)
  'handler-error', // 500: a bug in a handler, kept from reaching the process
] as const;

export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface Refusal {
  readonly reason: RefusalReason;
  /** Status sent, when one was. */
  readonly status?: number;
  /** A short, bounded description (error code, method, target length); never the peer's bytes. */
  readonly detail: string;
}

export interface ListenOptions {
  /** Sees every refusal; the daemon counts them and logs at debug (a flood must not flood the log). */
  readonly onRefused?: (refusal: Refusal) => void;
}

export interface HttpListener {
  /** The port actually bound (differs from the requested one when that was 0). */
  readonly port: number;
  /** Base URL for clients, e.g. http://127.0.0.1:10256. */
  readonly url: string;
  close(): Promise<void>;
}

// Limits. Probes and scrapes send one small request at once and read a small answer, so these
// are far above what a legitimate client needs and low enough that a peer cannot hold much:
/** Request line plus headers. Probes send < 1 KiB; a bearer token adds ~2 KiB. Node's default is 16 KiB. */
export const MAX_HEADER_BYTES = 8 * 1024;
/** A longer target cannot name anything served here; 2 KiB is what common clients and LBs allow. */
export const MAX_TARGET_LENGTH = 2048;
/** Time from connecting (or the end of the previous request) to complete headers; also idle sockets. */
export const HEADERS_TIMEOUT_MS = 5_000;
/** Time for a whole request; bodies are never read, so this only bounds a slow sender. */
export const REQUEST_TIMEOUT_MS = 10_000;
/** How often Node checks the two timeouts above (its default, 30 s, would let sockets live 35 s). */
export const TIMEOUT_CHECK_INTERVAL_MS = 1_000;
/**
 * Open connections per listener. Load balancer probers, kubelet-style probes and a scraper each
 * hold a connection for well under a second, so a few dozen at a time is already a lot; beyond
 * this a flood of idle sockets is dropped at accept instead of using descriptors and memory
 * (each held socket may buffer up to MAX_HEADER_BYTES for at most HEADERS_TIMEOUT_MS).
 */
export const MAX_CONNECTIONS = 128;

const ALLOWED_METHODS = 'GET, HEAD';

export async function listenHttp(
  host: string,
  port: number,
  handler: Handler,
  options: ListenOptions = {},
): Promise<HttpListener> {
  const refused = options.onRefused ?? (() => {});
  const pending = new PendingAnswers();
  const server: Server = createServer(
    { maxHeaderSize: MAX_HEADER_BYTES, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS },
    (request, response) => {
      pending.started(request.socket);
      response.once('close', () => pending.finished(request.socket));
      const refuse = (reason: RefusalReason, status: number, detail: string, headers = {}) => {
        refused({ reason, status, detail });
        answerAndClose(response, status, headers);
      };
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        refuse('method', 405, String(request.method), { Allow: ALLOWED_METHODS });
        return;
      }
      const target = requestPath(request.url ?? '');
      if (!target.ok) {
        const reason = target.status === 414 ? 'too-large' : 'malformed';
        refuse(reason, target.status, `target of ${request.url?.length ?? 0} bytes`);
        return;
      }
      const failed = (error: unknown) =>
        refuse('handler-error', 500, error instanceof Error ? error.message : String(error));
      try {
        Promise.resolve(handler(target.path, response)).catch(failed);
      } catch (error) {
        failed(error);
      }
    },
  );
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.keepAliveTimeout = 5_000;
  server.maxConnections = MAX_CONNECTIONS;
  server.on('drop', () => refused({ reason: 'connection-limit', detail: `${MAX_CONNECTIONS} open` }));
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    answerClientError(error, socket, pending, refused);
  });
  // CONNECT never reaches the request handler; without this Node would drop it uncounted. Its
  // socket has left the server's timeouts and error handling: close it here, whatever the peer does.
  server.on('connect', (request, socket: Socket) => {
    socket.on('error', () => {});
    refused({ reason: 'method', status: 405, detail: String(request.method) });
    socket.write(`HTTP/1.1 405 Method Not Allowed\r\nAllow: ${ALLOWED_METHODS}\r\nConnection: close\r\n\r\n`);
    socket.destroySoon();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // Once listening, an error is a failed accept (EMFILE, ENFILE): the server keeps listening, and
  // an unhandled 'error' event would end the process.
  server.on('error', (error: NodeJS.ErrnoException) =>
    refused({ reason: 'accept-failed', detail: error.code ?? error.message }),
  );
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

/** A short plain-text answer that closes the connection (what follows on it is not trusted). */
function answerAndClose(response: ServerResponse, status: number, headers: Record<string, string>): void {
  if (response.headersSent) {
    // Part of an answer is out: nothing valid can follow it.
    response.destroy();
    return;
  }
  response
    .writeHead(status, { 'Content-Type': 'text/plain', Connection: 'close', ...headers })
    .end(`${status} ${STATUS_TEXT[status] ?? 'error'}\n`);
}

const STATUS_TEXT: Record<number, string> = {
  400: 'bad request',
  405: 'method not allowed',
  414: 'URI too long',
  500: 'internal error',
};

/**
 * Node's own answers to what its parser rejects (as its default clientError handling gives them),
 * counted, then the connection closes: after the answers already under way on it, if any (garbage
 * pipelined behind a good request), without a status line that would land inside them.
 * A reset peer is not a refusal.
 */
function answerClientError(
  error: NodeJS.ErrnoException,
  socket: Socket,
  pending: PendingAnswers,
  refused: (refusal: Refusal) => void,
): void {
  if (error.code === 'ECONNRESET' || error.code === 'EPIPE') {
    socket.destroy();
    return;
  }
  const [status, text, reason] = CLIENT_ERRORS[error.code ?? ''] ?? [400, 'Bad Request', 'malformed'];
  refused({ reason, status, detail: error.code ?? 'parse error' });
  if (pending.closeAfterThem(socket)) return;
  // Node already put a no-op 'error' listener on the socket, so a write to a dead peer is harmless.
  if (socket.writable) socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\n\r\n`);
  socket.destroySoon();
}

/** Per socket, the answers not yet finished. */
class PendingAnswers {
  readonly #count = new WeakMap<Socket, number>();
  readonly #closing = new WeakSet<Socket>();

  started(socket: Socket): void {
    this.#count.set(socket, (this.#count.get(socket) ?? 0) + 1);
  }

  finished(socket: Socket): void {
    const left = (this.#count.get(socket) ?? 1) - 1;
    this.#count.set(socket, left);
    if (left === 0 && this.#closing.has(socket)) socket.destroySoon();
  }

  /** False when none is pending; else stops reading and closes once the last one is finished. */
  closeAfterThem(socket: Socket): boolean {
    if ((this.#count.get(socket) ?? 0) === 0) return false;
    this.#closing.add(socket);
    socket.pause();
    return true;
  }
}

const CLIENT_ERRORS: Record<string, readonly [number, string, RefusalReason]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'too-large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large', 'too-large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'timeout'],
};

export type RequestPath =
  | { readonly ok: true; readonly path: string }
  | { readonly ok: false; readonly status: 400 | 414 };

// RFC 3986 path characters: unreserved, sub-delims, ':', '@', '/', and %XX escapes.
const PATH_CHARACTERS = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The decoded path of a request target (origin form "/a?b", or absolute form "http://h/a?b", which
 * servers must accept), without its query; 400 for anything else or a bad escape, 414 when too long.
 * Total: never throws, whatever the peer sent.
 */
export function requestPath(target: string): RequestPath {
  if (target.length > MAX_TARGET_LENGTH) return { ok: false, status: 414 };
  const authority = ABSOLUTE_FORM.exec(target)?.[0];
  const path = target.slice(authority?.length ?? 0).split(/[?#]/, 1)[0]!;
  // "http://host" and "http://host?q" name the root.
  const raw = authority !== undefined && path === '' ? '/' : path;
  if (!raw.startsWith('/') || !PATH_CHARACTERS.test(raw)) return { ok: false, status: 400 };
  try {
    return { ok: true, path: decodeURIComponent(raw) };
  } catch {
    // Escapes that are not UTF-8 (e.g. %ff).
    return { ok: false, status: 400 };
  }
}

/** "0.0.0.0:10256", "[::]:10256", ":10256" (all addresses) → host and port; undefined if malformed. */
export function parseHostPort(text: string): { readonly host: string; readonly port: number } | undefined {
  const parts = splitHostPort(text);
  if (parts === undefined || parts.port > MAX_PORT) return undefined;
  return { host: parts.host || '::', port: parts.port };
}
