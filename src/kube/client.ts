// A small Kubernetes API client on an undici keep-alive pool: paginated JSON lists and streaming
// watches for the resources in resources.ts, through a proxy when client-go would use one
// (proxy-url, HTTPS_PROXY / NO_PROXY) and under the clientConnection.qps / burst rate limit. Every
// failure comes back as a classified ApiError value (HTTP status with reason and Retry-After,
// network, or no credentials), so the informer decides by kind, not by message text.

import type { ClusterConnection } from './connection.ts';
import { proxyFor } from './proxy-env.ts';
import type { TokenBucket } from './rate-limiter.ts';
import { collectionPath, type ResourceType } from './resources.ts';
import type { ApiRequestObserver } from './rest-client-metrics.ts';
import { Agent, type Dispatcher, ProxyAgent } from './undici-dispatchers.ts';

export type ApiError =
  | {
      readonly kind: 'status';
      readonly status: number;
      /** The Status object's reason (e.g. Expired, TooManyRequests), or the HTTP status text. */
      readonly reason: string;
      readonly message: string;
      readonly retryAfterSeconds?: number;
    }
  | { readonly kind: 'network'; readonly message: string }
  | { readonly kind: 'decode'; readonly message: string }
  /** No credentials to send: the credential plugin failed (its message names it). */
  | { readonly kind: 'credentials'; readonly message: string };

export type ApiResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: ApiError };

/** 410 Gone: the resourceVersion or continue token is older than the server's history. */
export function isExpired(error: ApiError): boolean {
  return error.kind === 'status' && error.status === 410;
}

export function formatApiError(error: ApiError): string {
  return error.kind === 'status'
    ? `HTTP ${error.status} ${error.reason}: ${error.message}`
    : `${error.kind}: ${error.message}`;
}

export interface SelectorParams {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
}

export interface ListParams extends SelectorParams {
  readonly limit?: number;
  readonly continue?: string;
}

export interface ListPage {
  readonly resourceVersion: string;
  readonly continue?: string;
  readonly items: readonly unknown[];
}

export interface WatchParams extends SelectorParams {
  /** Resume after this resourceVersion; omit with sendInitialEvents for a watch-list. */
  readonly resourceVersion?: string;
  readonly timeoutSeconds: number;
  readonly allowWatchBookmarks: boolean;
  /** Watch-list: the server first sends the current state as ADDED events, then a marked bookmark. */
  readonly sendInitialEvents?: boolean;
}

/** One item read from a watch stream; a stream that breaks ends with an `error` item. */
export type WatchItem =
  | { readonly kind: 'event'; readonly type: string; readonly object: unknown }
  | { readonly kind: 'malformed'; readonly line: string; readonly reason: string }
  | { readonly kind: 'error'; readonly error: ApiError };

/** What the informer needs from a client; tests may substitute their own. */
export interface KubeApi {
  list(resource: ResourceType, params: ListParams, signal?: AbortSignal): Promise<ApiResult<ListPage>>;
  watch(
    resource: ResourceType,
    params: WatchParams,
    signal?: AbortSignal,
  ): Promise<ApiResult<AsyncIterable<WatchItem>>>;
}

export interface KubeClientOptions {
  /** How long to wait for response headers (a stalled server); default 30 s. */
  readonly headersTimeoutMs?: number;
  /** How long a list body may go quiet; default 60 s. Watches have no body timeout. */
  readonly listBodyTimeoutMs?: number;
  readonly userAgent?: string;
  /** The environment HTTPS_PROXY / HTTP_PROXY / NO_PROXY are read from; none when absent. */
  readonly env?: NodeJS.ProcessEnv;
  /** clientConnection.qps / burst: every list page and every watch start takes a token. */
  readonly rateLimiter?: TokenBucket;
  /** Told of every request's outcome (rest-client-metrics.ts). */
  readonly onRequest?: ApiRequestObserver;
}

interface RawResponse {
  readonly statusCode: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: AsyncIterable<unknown> & {
    text(): Promise<string>;
    setEncoding(encoding: BufferEncoding): unknown;
    dump(): Promise<void>;
  };
}

export class KubeClient implements KubeApi {
  readonly #origin: string;
  readonly #pathPrefix: string;
  readonly #connection: ClusterConnection;
  readonly #proxy: string | undefined;
  readonly #headersTimeoutMs: number;
  readonly #listBodyTimeoutMs: number;
  readonly #userAgent: string;
  readonly #rateLimiter: TokenBucket | undefined;
  readonly #onRequest: ApiRequestObserver | undefined;
  #dispatcher: Dispatcher;
  /** The client certificate #dispatcher presents (a credential plugin's may change). */
  #dispatcherCert: string | undefined;
  /** Dispatchers replaced by a certificate rotation: their open watches end on their own. */
  readonly #retired = new Set<Dispatcher>();

  constructor(connection: ClusterConnection, options: KubeClientOptions = {}) {
    const url = new URL(connection.server);
    this.#origin = url.origin;
    this.#pathPrefix = url.pathname.replace(/\/+$/, '');
    this.#connection = connection;
    this.#proxy = proxyFor(url, connection.proxyUrl, options.env ?? {});
    this.#headersTimeoutMs = options.headersTimeoutMs ?? 30_000;
    this.#listBodyTimeoutMs = options.listBodyTimeoutMs ?? 60_000;
    this.#userAgent = options.userAgent ?? 'kproxy/0.1';
    this.#rateLimiter = options.rateLimiter;
    this.#onRequest = options.onRequest;
    this.#dispatcherCert = connection.cert;
    this.#dispatcher = this.#newDispatcher(connection.cert, connection.key);
  }

  /** The proxy requests go through, if any, without its credentials (for the startup log). */
  get proxy(): string | undefined {
    if (this.#proxy === undefined) return undefined;
    const url = new URL(this.#proxy);
    url.username = '';
    url.password = '';
    return url.href;
  }

  async close(): Promise<void> {
    await Promise.all([this.#dispatcher, ...this.#retired].map((d) => d.destroy()));
  }

  #newDispatcher(cert: string | undefined, key: string | undefined): Dispatcher {
    const tls = {
      ...(this.#connection.ca ? { ca: this.#connection.ca } : {}),
      ...(cert ? { cert } : {}),
      ...(key ? { key } : {}),
      ...(this.#connection.tlsServerName ? { servername: this.#connection.tlsServerName } : {}),
      rejectUnauthorized: this.#connection.insecureSkipTlsVerify !== true,
    };
    // A few watches stay open for good; lists and writes share the rest.
    const pool = { connections: 16, keepAliveTimeout: 30_000 };
    return this.#proxy === undefined
      ? new Agent({ ...pool, connect: tls })
      : new ProxyAgent({ ...pool, uri: this.#proxy, requestTls: tls });
  }

  /** Switches to a new dispatcher when the credential plugin's certificate changed (as client-go
   * closes its connections on rotation, new requests must not reuse ones made with the old one). */
  async #useCurrentCertificate(): Promise<ApiError | undefined> {
    const source = this.#connection.certSource;
    if (!source) return undefined;
    let pair: { readonly cert: string; readonly key: string } | undefined;
    try {
      pair = await source.certificate();
    } catch (err) {
      return { kind: 'credentials', message: errorMessage(err) };
    }
    if (pair === undefined || pair.cert === this.#dispatcherCert) return undefined;
    const old = this.#dispatcher;
    this.#dispatcher = this.#newDispatcher(pair.cert, pair.key);
    this.#dispatcherCert = pair.cert;
    this.#retired.add(old);
    void old
      .close()
      .catch(() => {})
      .finally(() => this.#retired.delete(old));
    return undefined;
  }

  async list(resource: ResourceType, params: ListParams, signal?: AbortSignal): Promise<ApiResult<ListPage>> {
    const query = new URLSearchParams();
    setSelectors(query, params);
    if (params.limit) query.set('limit', String(params.limit));
    if (params.continue) query.set('continue', params.continue);
    const res = await this.#get(`${collectionPath(resource)}?${query}`, this.#listBodyTimeoutMs, signal);
    if (!res.ok) return res;
    let text: string;
    try {
      text = await res.value.body.text();
    } catch (err) {
      return { ok: false, error: { kind: 'network', message: errorMessage(err) } };
    }
    let parsed: { metadata?: { resourceVersion?: unknown; continue?: unknown }; items?: unknown };
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      return {
        ok: false,
        error: { kind: 'decode', message: `list ${resource.plural}: ${errorMessage(err)}` },
      };
    }
    const rv = parsed.metadata?.resourceVersion;
    if (typeof rv !== 'string' || !Array.isArray(parsed.items)) {
      return {
        ok: false,
        error: { kind: 'decode', message: `list ${resource.plural}: not a ${resource.listKind}` },
      };
    }
    const cont = parsed.metadata?.continue;
    return {
      ok: true,
      value: {
        resourceVersion: rv,
        items: parsed.items,
        ...(typeof cont === 'string' && cont ? { continue: cont } : {}),
      },
    };
  }

  async watch(
    resource: ResourceType,
    params: WatchParams,
    signal?: AbortSignal,
  ): Promise<ApiResult<AsyncIterable<WatchItem>>> {
    const query = new URLSearchParams({ watch: 'true' });
    setSelectors(query, params);
    if (params.resourceVersion !== undefined) query.set('resourceVersion', params.resourceVersion);
    if (params.allowWatchBookmarks) query.set('allowWatchBookmarks', 'true');
    if (params.sendInitialEvents) {
      query.set('sendInitialEvents', 'true');
      query.set('resourceVersionMatch', 'NotOlderThan');
    }
    query.set('timeoutSeconds', String(params.timeoutSeconds));
    // bodyTimeout 0: a watch on a quiet resource may carry nothing for minutes, and that is fine.
    const res = await this.#get(`${collectionPath(resource)}?${query}`, 0, signal);
    if (!res.ok) return res;
    return { ok: true, value: readWatchLines(res.value.body) };
  }

  async #get(
    path: string,
    bodyTimeout: number,
    signal: AbortSignal | undefined,
  ): Promise<ApiResult<RawResponse>> {
    // One token per call: the one retry after a 401 below is a detail of authentication.
    if (this.#rateLimiter && !(await this.#rateLimiter.wait(signal)))
      return { ok: false, error: { kind: 'network', message: 'aborted while rate limited' } };
    let res = await this.#request(path, bodyTimeout, signal);
    if (res.ok && res.value.statusCode === 401 && this.#connection.tokenSource) {
      // The token may have been rotated since we cached it (or the plugin's revoked): fetch anew and retry.
      await res.value.body.dump();
      this.#connection.tokenSource.invalidate();
      res = await this.#request(path, bodyTimeout, signal);
    }
    if (!res.ok) return res;
    if (res.value.statusCode >= 200 && res.value.statusCode < 300) return res;
    return { ok: false, error: await statusError(res.value) };
  }

  async #request(
    path: string,
    bodyTimeout: number,
    signal: AbortSignal | undefined,
  ): Promise<ApiResult<RawResponse>> {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': this.#userAgent };
    const certProblem = await this.#useCurrentCertificate();
    if (certProblem) return { ok: false, error: certProblem };
    let token: string | undefined;
    try {
      token = await this.#connection.tokenSource?.token();
    } catch (err) {
      return { ok: false, error: { kind: 'credentials', message: errorMessage(err) } };
    }
    if (token) headers.authorization = `Bearer ${token}`;
    const startedAt = performance.now();
    const observe = (code: number | undefined) =>
      this.#onRequest?.({ method: 'GET', code, seconds: (performance.now() - startedAt) / 1000 });
    try {
      const res = await this.#dispatcher.request({
        origin: this.#origin,
        method: 'GET',
        path: this.#pathPrefix + path,
        headers,
        headersTimeout: this.#headersTimeoutMs,
        bodyTimeout,
        ...(signal ? { signal } : {}),
      });
      observe(res.statusCode);
      return { ok: true, value: res as unknown as RawResponse };
    } catch (err) {
      observe(undefined);
      return { ok: false, error: { kind: 'network', message: errorMessage(err) } };
    }
  }
}

function setSelectors(query: URLSearchParams, params: SelectorParams): void {
  if (params.labelSelector) query.set('labelSelector', params.labelSelector);
  if (params.fieldSelector) query.set('fieldSelector', params.fieldSelector);
}

async function statusError(res: RawResponse): Promise<ApiError> {
  let reason = `HTTP ${res.statusCode}`;
  let message = '';
  try {
    const body = JSON.parse(await res.body.text()) as { reason?: unknown; message?: unknown };
    if (typeof body.reason === 'string') reason = body.reason;
    if (typeof body.message === 'string') message = body.message;
  } catch {
    // Not a Status body (a proxy's error page, a cut connection): the status code says enough.
  }
  const retryAfterSeconds = parseRetryAfter(res.headers['retry-after']);
  return {
    kind: 'status',
    status: res.statusCode,
    reason,
    message,
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
  };
}

/** Retry-After is either delay-seconds or an HTTP date. */
export function parseRetryAfter(
  value: string | string[] | undefined,
  now: number = Date.now(),
): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text.trim() === '') return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim());
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/** Splits a watch body into newline-delimited JSON events. */
async function* readWatchLines(body: RawResponse['body']): AsyncGenerator<WatchItem> {
  body.setEncoding('utf8');
  let pending = '';
  try {
    for await (const chunk of body) {
      pending += chunk as string;
      let start = 0;
      let newline = pending.indexOf('\n');
      while (newline !== -1) {
        const line = pending.slice(start, newline);
        if (line.trim() !== '') yield parseWatchLine(line);
        start = newline + 1;
        newline = pending.indexOf('\n', start);
      }
      pending = pending.slice(start);
    }
  } catch (err) {
    yield { kind: 'error', error: { kind: 'network', message: errorMessage(err) } };
    return;
  }
  if (pending.trim() !== '') yield parseWatchLine(pending);
}

function parseWatchLine(line: string): WatchItem {
  let parsed: { type?: unknown; object?: unknown };
  try {
    parsed = JSON.parse(line);
  } catch (err) {
    return { kind: 'malformed', line: line.slice(0, 200), reason: errorMessage(err) };
  }
  if (typeof parsed?.type !== 'string' || typeof parsed.object !== 'object' || parsed.object === null) {
    return { kind: 'malformed', line: line.slice(0, 200), reason: 'not a watch event (type and object)' };
  }
  return { kind: 'event', type: parsed.type, object: parsed.object };
}

function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}
