// A real HTTP(S) server that speaks kube-apiserver's wire protocol for Services, EndpointSlices and
// Nodes: discovery, JSON lists (chunked with expiring continue tokens), watch streams
// (newline-delimited JSON events over chunked transfer, bookmarks, watch-list), label/field
// selectors, create/update/patch/delete, server-side printing (Tables, for kubectl get), bearer-token
// and client-certificate authentication, and fault injection. It serves what a given Kubernetes minor
// serves (profiles.ts: discovery, ServiceCIDRs, watch-list, the fields a write keeps), can be
// restarted as another minor with its state kept, and refuses resources that RBAC does not grant. Tests and the netns lab drive it over
// HTTP (kubectl among the clients) or in-process through `state` and `faults`.

import { Buffer } from 'node:buffer';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { groupVersionPath, RESOURCE_TYPES, type ResourceType } from '../../src/kube/resources.ts';
import { discoveryDocument, servedBy } from './discovery.ts';
import { mergePatch, PatchError, strategicMergePatch } from './patch.ts';
import { type ApiProfile, type Minor, NEWEST_MINOR, PROFILES } from './profiles.ts';
import { matches, parseFieldSelector, parseLabelSelector, type Selector } from './selectors.ts';
import {
  type Change,
  ClusterState,
  type StoredMetadata,
  type StoredRecord,
  type WriteResult,
} from './state.ts';
import {
  faultStatus,
  forbidden,
  internalError,
  invalid,
  pathNotFound,
  status,
  watchListRefused,
} from './status-bodies.ts';
import { type IncludeObject, parseIncludeObject, toTable, wantsTable } from './table.ts';
import { versionedWrite } from './version-fields.ts';

export interface ApiServerOptions {
  readonly host?: string;
  readonly port?: number;
  /** Serve HTTPS with this certificate; with `clientCa`, client certificates signed by it are accepted. */
  readonly tls?: { readonly cert: string; readonly key: string; readonly clientCa?: string };
  /** Accepted bearer tokens. Without tokens and without clientCa, every request is allowed. */
  readonly tokens?: readonly string[];
  readonly historyLimit?: number;
  /** How often an idle watch that asked for bookmarks gets one. */
  readonly bookmarkIntervalMs?: number;
  /** The Kubernetes minor whose API to serve (profiles.ts); the newest by default. */
  readonly version?: Minor;
  /** Whether watch-list (sendInitialEvents) is offered, whatever the minor; when not, such a watch is refused with 422. */
  readonly watchList?: boolean;
  /** Resources answered with 404 whatever the minor, as by a server older than them. */
  readonly unserved?: readonly ResourceType['plural'][];
  /** Resources that RBAC does not grant the client: 403 (system:node-proxier before 1.33 lacks servicecidrs). */
  readonly forbidden?: readonly ResourceType['plural'][];
}

export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly authorization: string | undefined;
}

interface PendingFault {
  count: number;
  readonly apply: (res: http.ServerResponse) => 'handled' | Promise<void>;
}

interface Watch {
  readonly socket: Socket;
  readonly write: (line: string | Buffer) => void;
  /** Sends an ERROR event with this Status and ends the watch. */
  readonly fail: (status: unknown) => void;
  /** Ends the watch cleanly: its response completes. */
  readonly end: () => void;
  /** From now on send nothing and never end: what a client sees of a half-open connection. */
  readonly freeze: () => void;
}

type Route =
  | {
      readonly resource: ResourceType;
      readonly namespace: string | undefined;
      readonly name: string | undefined;
    }
  | undefined;

const MAX_REQUEST_LOG = 2000;
/** How long a restart lets connections finish what they are sending (a loopback write: < 1 ms). */
const RESTART_DRAIN_MS = 200;
const MAX_SNAPSHOTS = 32;
const MERGE_PATCH = 'application/merge-patch+json';
const STRATEGIC_MERGE_PATCH = 'application/strategic-merge-patch+json';
const OPENAPI_V2 = '/openapi/v2';
const NAMESPACE_PATH = /^\/api\/v1\/namespaces\/([^/]+)$/;

/** Fault injection, for tests and the lab. Request faults apply to the next `count` GET requests. */
export class Faults {
  readonly #server: StandInApiServer;
  readonly pending: PendingFault[] = [];

  constructor(server: StandInApiServer) {
    this.#server = server;
  }

  /**
   * Answer the next `count` GETs with this status and a Status body (faultStatus): 429 with
   * Retry-After as the storage layer's NewTooManyRequests, 500, or 503 (a server still installing its
   * paths, as during an upgrade). A list or watch shed by overload gets overloadNext's answer.
   */
  failNext(count: number, code: number, retryAfterSeconds?: number): void {
    this.pending.push({
      count,
      apply: (res) => {
        const headers: Record<string, string> = {};
        if (retryAfterSeconds !== undefined) headers['retry-after'] = String(retryAfterSeconds);
        sendJson(res, code, faultStatus(code, retryAfterSeconds), headers);
        return 'handled';
      },
    });
  }

  /**
   * Shed the next `count` GETs as an overloaded kube-apiserver does (max-in-flight and priority and
   * fairness filters, apiserver/pkg/server/filters/maxinflight.go tooManyRequests): 429, Retry-After,
   * and a plain-text body, not a Status.
   */
  overloadNext(count: number, retryAfterSeconds: number): void {
    this.pending.push({
      count,
      apply: (res) => {
        const text = 'Too many requests, please try again later.\n';
        res.writeHead(429, {
          'content-type': 'text/plain; charset=utf-8',
          'x-content-type-options': 'nosniff',
          'retry-after': String(retryAfterSeconds),
          'content-length': Buffer.byteLength(text),
        });
        res.end(text);
        return 'handled';
      },
    });
  }

  /** Reset the connections of the next `count` GETs without an answer (a server going down mid-upgrade). */
  resetNext(count: number): void {
    this.pending.push({
      count,
      apply: (res) => {
        res.socket?.resetAndDestroy();
        return 'handled';
      },
    });
  }

  /**
   * Every open watch gets an ERROR event carrying this Status and then ends, as kube-apiserver ends a
   * watch it cannot continue: 410 when the watch cache no longer holds its resourceVersion, 500 on a
   * storage error.
   */
  errorInWatches(code: 410 | 500): void {
    this.#server.errorInWatches(code);
  }

  /** Hold the next `count` GETs for `ms` before answering them normally. */
  stallNext(count: number, ms: number): void {
    this.pending.push({ count, apply: () => new Promise((resolve) => setTimeout(resolve, ms)) });
  }

  /** Answer the next `count` GETs with HTTP 410 Expired (as a server answers a too-old resourceVersion). */
  expireNext(count: number): void {
    this.pending.push({
      count,
      apply: (res) => {
        sendStatus(res, 410, 'Expired', 'injected fault: too old resource version');
        return 'handled';
      },
    });
  }

  /** Cut every open watch connection without a clean end. */
  dropWatches(): number {
    return this.#server.dropWatches();
  }

  /** Open watches go silent and stay open, as over a connection whose far end vanished. */
  freezeWatches(): void {
    this.#server.freezeWatches();
  }

  /** Write a line to every open watch (e.g. malformed JSON). */
  writeToWatches(line: string): void {
    this.#server.writeToWatches(line);
  }

  /** Forget the event history: open watches' next resume and outstanding continue tokens get 410. */
  compact(): void {
    this.#server.compact();
  }
}

export class StandInApiServer {
  readonly state: ClusterState;
  readonly faults: Faults;
  readonly requests: RequestRecord[] = [];
  #url = '';
  #tokens: Set<string> | undefined;
  readonly #options: ApiServerOptions;
  #profile: ApiProfile;
  readonly #server: http.Server;
  readonly #watches = new Set<Watch>();
  readonly #sockets = new Set<Socket>();
  readonly #snapshots = new Map<string, { readonly rv: number; readonly records: readonly StoredRecord[] }>();
  #snapshotSeq = 0;

  constructor(options: ApiServerOptions = {}) {
    this.#options = options;
    this.#profile = PROFILES[options.version ?? NEWEST_MINOR];
    this.state = new ClusterState({ historyLimit: options.historyLimit });
    this.faults = new Faults(this);
    this.#tokens = options.tokens ? new Set(options.tokens) : undefined;
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      this.#handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) sendStatus(res, 500, 'InternalError', String(err));
        else res.destroy();
      });
    };
    this.#server = options.tls
      ? https.createServer(
          {
            cert: options.tls.cert,
            key: options.tls.key,
            ...(options.tls.clientCa
              ? { ca: options.tls.clientCa, requestCert: true, rejectUnauthorized: false }
              : {}),
          },
          handler,
        )
      : http.createServer(handler);
    this.#server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    // tls servers report the TLS socket on secureConnection; track it too so stop() can close it.
    this.#server.on('secureConnection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  /** Base URL, e.g. http://127.0.0.1:40123 (after start). */
  get url(): string {
    return this.#url;
  }

  get openWatches(): number {
    return this.#watches.size;
  }

  /** The Kubernetes minor served now. */
  get version(): Minor {
    return this.#profile.minor;
  }

  /** Replace the accepted bearer tokens (token rotation). */
  setTokens(tokens: readonly string[]): void {
    this.#tokens = new Set(tokens);
  }

  async start(): Promise<string> {
    const host = this.#options.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#options.port ?? 0, host, () => resolve());
    });
    const { port } = this.#server.address() as AddressInfo;
    const shownHost = host.includes(':') ? `[${host}]` : host;
    this.#url = `${this.#options.tls ? 'https' : 'http'}://${shownHost}:${port}`;
    return this.#url;
  }

  async stop(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /**
   * A control-plane upgrade as a client sees it: kube-apiserver's graceful termination ends every
   * watch cleanly (its response completes, as --shutdown-watch-termination-grace-period drains
   * them) and stops listening; the new version listens on the same address with the cluster's
   * state and resourceVersions kept (they live in etcd, not in the server). A crash instead is
   * stop() or Faults.dropWatches and resetNext.
   */
  async restartAs(version: Minor): Promise<void> {
    const port = Number(new URL(this.#url).port);
    for (const w of this.#watches) w.end();
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    // Close() ends idle connections; a watch's becomes idle once its end is written. What is still
    // busy after the drain (a request in flight) is cut.
    const drained = await Promise.race([
      closed.then(() => true),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), RESTART_DRAIN_MS)),
    ]);
    if (!drained) {
      for (const socket of this.#sockets) socket.destroy();
      await closed;
    }
    this.#profile = PROFILES[version];
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, this.#options.host ?? '127.0.0.1', () => resolve());
    });
  }

  /** Compaction also ends every list snapshot that continue tokens point into. */
  compact(): void {
    this.state.compact();
    this.#snapshots.clear();
  }

  dropWatches(): number {
    const n = this.#watches.size;
    for (const w of this.#watches) w.socket.destroy();
    this.#watches.clear();
    return n;
  }

  writeToWatches(line: string): void {
    for (const w of this.#watches) w.write(line);
  }

  freezeWatches(): void {
    for (const w of this.#watches) w.freeze();
  }

  errorInWatches(code: 410 | 500): void {
    const body =
      code === 410
        ? status(410, 'Expired', 'The resourceVersion for the provided watch is too old.')
        : internalError('etcdserver: request timed out');
    for (const w of this.#watches) w.fail(body);
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    this.requests.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      authorization: req.headers.authorization,
    });
    if (this.requests.length > MAX_REQUEST_LOG)
      this.requests.splice(0, this.requests.length - MAX_REQUEST_LOG);

    if (!this.#authenticated(req)) {
      sendStatus(res, 401, 'Unauthorized', 'Unauthorized');
      return;
    }
    const discovery =
      req.method === 'GET'
        ? discoveryDocument(url.pathname, req.headers.host ?? '', this.#profile)
        : undefined;
    if (discovery !== undefined) {
      sendJson(res, 200, discovery);
      return;
    }
    if (req.method === 'GET' && url.pathname === OPENAPI_V2) {
      sendOpenApiV2(res);
      return;
    }
    const namespace = NAMESPACE_PATH.exec(url.pathname);
    if (req.method === 'GET' && namespace) {
      sendNamespace(res, decodeURIComponent(namespace[1]!));
      return;
    }
    const route = parseRoute(url.pathname);
    if (!route || !this.#serves(route.resource)) {
      sendJson(res, 404, pathNotFound());
      return;
    }
    if (this.#options.forbidden?.includes(route.resource.plural)) {
      sendJson(res, 403, forbidden(route, req.method ?? 'GET', url.searchParams));
      return;
    }
    if (req.method === 'GET') {
      const fault = this.faults.pending.find((f) => f.count > 0);
      if (fault) {
        fault.count--;
        const outcome = fault.apply(res);
        if (outcome === 'handled') return;
        await outcome;
        if (res.destroyed) return;
      }
    }
    let table: IncludeObject | undefined;
    if (req.method === 'GET' && wantsTable(req.headers.accept)) {
      const value = url.searchParams.get('includeObject');
      table = parseIncludeObject(value);
      if (table === undefined) {
        sendStatus(res, 400, 'BadRequest', `includeObject: Unsupported value: "${value}"`);
        return;
      }
    }
    switch (req.method) {
      case 'GET':
        if (route.name !== undefined) this.#get(res, route.resource, route.namespace, route.name, table);
        else if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1')
          this.#watch(req, res, route.resource, route.namespace, url.searchParams, table);
        else this.#list(res, route.resource, route.namespace, url.searchParams, table);
        return;
      case 'PATCH':
        if (route.name === undefined) {
          sendStatus(res, 405, 'MethodNotAllowed', 'PATCH needs an object name');
          return;
        }
        await this.#patch(req, res, route.resource, route.namespace, route.name);
        return;
      case 'POST':
      case 'PUT': {
        const body = await readJson(req);
        if (body === undefined || typeof body !== 'object' || body === null) {
          sendStatus(res, 400, 'BadRequest', 'the request body is not a JSON object');
          return;
        }
        const versioned = this.#versioned(res, route.resource, body as Record<string, unknown>);
        if (!versioned) return;
        const input = versioned as { metadata?: { name?: unknown; namespace?: unknown } };
        const metadata = { ...input.metadata };
        if (route.namespace !== undefined) metadata.namespace = route.namespace;
        if (req.method === 'PUT') {
          if (route.name === undefined || metadata.name !== route.name) {
            sendStatus(res, 400, 'BadRequest', 'the name in the body does not match the URL');
            return;
          }
          sendWrite(res, this.state.update(route.resource, { ...input, metadata }), 200);
        } else {
          sendWrite(res, this.state.create(route.resource, { ...input, metadata }), 201);
        }
        return;
      }
      case 'DELETE':
        if (route.name === undefined) {
          sendStatus(res, 405, 'MethodNotAllowed', 'collection delete is not supported');
          return;
        }
        sendDeleted(res, route.resource, this.state.delete(route.resource, route.namespace, route.name));
        return;
      default:
        sendStatus(res, 405, 'MethodNotAllowed', `${req.method} is not supported`);
    }
  }

  #authenticated(req: http.IncomingMessage): boolean {
    const needsAuth = this.#tokens !== undefined || this.#options.tls?.clientCa !== undefined;
    if (!needsAuth) return true;
    const auth = req.headers.authorization;
    if (auth?.startsWith('Bearer ') && this.#tokens?.has(auth.slice(7))) return true;
    const socket = req.socket as TLSSocket;
    return this.#options.tls?.clientCa !== undefined && socket.authorized === true;
  }

  #get(
    res: http.ServerResponse,
    resource: ResourceType,
    namespace: string | undefined,
    name: string,
    table: IncludeObject | undefined,
  ): void {
    const record = this.state.record(resource, namespace, name);
    if (!record) sendStatus(res, 404, 'NotFound', `${resource.plural} "${name}" not found`);
    else if (table)
      sendJson(
        res,
        200,
        toTable(resource, [record.object()], { resourceVersion: record.metadata.resourceVersion }, table),
      );
    else sendBody(res, 200, record.json);
  }

  /** A JSON merge patch or strategic merge patch of one object; server-side apply is refused (415). */
  async #patch(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    resource: ResourceType,
    namespace: string | undefined,
    name: string,
  ): Promise<void> {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
    if (type !== MERGE_PATCH && type !== STRATEGIC_MERGE_PATCH) {
      await readJson(req);
      sendStatus(
        res,
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: ${MERGE_PATCH}, ${STRATEGIC_MERGE_PATCH}`,
      );
      return;
    }
    const patch = await readJson(req);
    const current = this.state.record(resource, namespace, name);
    if (!current) {
      sendStatus(res, 404, 'NotFound', `${resource.plural} "${name}" not found`);
      return;
    }
    if (patch === undefined) {
      sendStatus(res, 400, 'BadRequest', 'the patch is not valid JSON');
      return;
    }
    let patched: unknown;
    try {
      patched =
        type === MERGE_PATCH
          ? mergePatch(current.object() as never, patch as never)
          : strategicMergePatch(resource.kind, current.object() as never, patch as never);
    } catch (err) {
      if (!(err instanceof PatchError)) throw err;
      sendStatus(res, 422, 'Invalid', err.message);
      return;
    }
    const metadata = (patched as { metadata?: Record<string, unknown> }).metadata ?? {};
    if (metadata.name !== name || (resource.namespaced && metadata.namespace !== namespace)) {
      sendStatus(res, 400, 'BadRequest', 'the patch may not change metadata.name or metadata.namespace');
      return;
    }
    const rv = metadata.resourceVersion;
    if (rv !== undefined && rv !== current.metadata.resourceVersion) {
      sendStatus(
        res,
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${resource.plural} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
      return;
    }
    const versioned = this.#versioned(res, resource, patched as Record<string, unknown>);
    if (versioned) sendWrite(res, this.state.update(resource, versioned as never), 200);
  }

  #serves(resource: ResourceType): boolean {
    return servedBy(this.#profile, resource) && !this.#options.unserved?.includes(resource.plural);
  }

  /**
   * The object as this minor stores it (version-fields.ts), with a Warning header per unknown field
   * pruned; undefined after answering 422 when it holds a value this minor refuses.
   */
  #versioned(
    res: http.ServerResponse,
    resource: ResourceType,
    input: Record<string, unknown>,
  ): Record<string, unknown> | undefined {
    const result = versionedWrite(this.#profile, resource, input);
    if (!result.ok) {
      const name = String((input.metadata as { name?: unknown } | undefined)?.name ?? '');
      sendJson(res, 422, invalid(resource, name, result.field, result.message));
      return undefined;
    }
    if (result.unknownFields.length > 0)
      res.setHeader(
        'warning',
        result.unknownFields.map((f) => `299 - ${JSON.stringify(`unknown field "${f}"`)}`),
      );
    return result.object;
  }

  #list(
    res: http.ServerResponse,
    resource: ResourceType,
    namespace: string | undefined,
    q: URLSearchParams,
    table: IncludeObject | undefined,
  ): void {
    const filter = selectorFilter(resource, namespace, q);
    if (typeof filter === 'string') {
      sendStatus(res, 400, 'BadRequest', filter);
      return;
    }
    const limit = Number(q.get('limit') ?? '0');
    const token = q.get('continue');
    let snapshotId: string;
    let offset = 0;
    let snapshot: { readonly rv: number; readonly records: readonly StoredRecord[] } | undefined;
    if (token) {
      const decoded = decodeContinue(token);
      snapshot = decoded ? this.#snapshots.get(decoded.id) : undefined;
      if (!decoded || !snapshot || snapshot.rv < this.state.oldestResourceVersion) {
        sendStatus(
          res,
          410,
          'Expired',
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
        );
        return;
      }
      snapshotId = decoded.id;
      offset = decoded.offset;
    } else {
      const full = this.state.snapshot(resource);
      snapshot = { rv: full.rv, records: full.records.filter((r) => filter(r.metadata)) };
      snapshotId = String(++this.#snapshotSeq);
    }
    const end = limit > 0 ? Math.min(offset + limit, snapshot.records.length) : snapshot.records.length;
    const metadata: Record<string, unknown> = { resourceVersion: String(snapshot.rv) };
    if (end < snapshot.records.length) {
      this.#snapshots.set(snapshotId, snapshot);
      if (this.#snapshots.size > MAX_SNAPSHOTS) this.#snapshots.delete(this.#snapshots.keys().next().value!);
      metadata.continue = encodeContinue(snapshotId, snapshot.rv, end);
      metadata.remainingItemCount = snapshot.records.length - end;
    } else {
      this.#snapshots.delete(snapshotId);
    }
    const records = snapshot.records.slice(offset, end);
    if (table)
      sendJson(
        res,
        200,
        toTable(
          resource,
          records.map((r) => r.object()),
          metadata,
          table,
        ),
      );
    else sendBody(res, 200, listBody(resource, metadata, records));
  }

  #watch(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    resource: ResourceType,
    namespace: string | undefined,
    q: URLSearchParams,
    table: IncludeObject | undefined,
  ): void {
    const filter = selectorFilter(resource, namespace, q);
    if (typeof filter === 'string') {
      sendStatus(res, 400, 'BadRequest', filter);
      return;
    }
    const bookmarks = q.get('allowWatchBookmarks') === 'true';
    const initialEvents = q.get('sendInitialEvents') === 'true';
    if (initialEvents) {
      if (!(this.#options.watchList ?? this.#profile.watchList)) {
        sendJson(res, 422, watchListRefused());
        return;
      }
      if (q.get('resourceVersionMatch') !== 'NotOlderThan' || !bookmarks) {
        sendStatus(
          res,
          422,
          'Invalid',
          'sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true',
        );
        return;
      }
    }
    const rvParam = q.get('resourceVersion') ?? '';
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    res.flushHeaders();
    let frozen = false;
    const write = (line: string | Buffer) => {
      // Ended (its timeoutSeconds ran out) but not yet closed: a change or fault arriving then is dropped.
      if (!res.destroyed && !res.writableEnded && !frozen) res.write(line);
    };
    const send = (type: string, object: unknown) => write(`${JSON.stringify({ type, object })}\n`);
    // As kube-apiserver does for a Table watch: each object event carries a one-row Table.
    const sendObject = (type: string, record: StoredRecord) =>
      table
        ? send(
            type,
            toTable(resource, [record.object()], { resourceVersion: record.metadata.resourceVersion }, table),
          )
        : write(Buffer.concat([Buffer.from(`{"type":"${type}","object":`), record.json, EVENT_END]));
    const bookmark = (annotations?: Record<string, string>) =>
      send('BOOKMARK', {
        kind: resource.kind,
        apiVersion: resource.apiVersion,
        metadata: {
          resourceVersion: String(this.state.resourceVersion),
          ...(annotations ? { annotations } : {}),
        },
      });
    const deliver = (change: Change) => {
      if (change.resource !== resource.plural) return;
      const type = filteredType(change, filter);
      if (type) sendObject(type, change.record);
    };

    // Replaying history and subscribing happen in one synchronous step, so no change falls between.
    if (initialEvents || rvParam === '' || rvParam === '0') {
      for (const record of this.state.snapshot(resource).records)
        if (filter(record.metadata)) sendObject('ADDED', record);
      if (initialEvents) bookmark({ 'k8s.io/initial-events-end': 'true' });
    } else {
      const changes = this.state.changesSince(resource, Number(rvParam));
      if (changes === 'expired') {
        send(
          'ERROR',
          status(
            410,
            'Expired',
            `too old resource version: ${rvParam} (${this.state.oldestResourceVersion})`,
          ),
        );
        res.end();
        return;
      }
      for (const change of changes) deliver(change);
    }
    const unsubscribe = this.state.subscribe(deliver);
    const timers: NodeJS.Timeout[] = [];
    const freeze = () => {
      frozen = true;
      for (const t of timers) clearTimeout(t);
    };
    const fail = (body: unknown) => {
      send('ERROR', body);
      if (!res.writableEnded) res.end();
    };
    const watch: Watch = { socket: req.socket, write, freeze, fail, end: () => res.end() };
    this.#watches.add(watch);
    if (bookmarks) timers.push(setInterval(() => bookmark(), this.#options.bookmarkIntervalMs ?? 1000));
    const timeoutSeconds = Number(q.get('timeoutSeconds') ?? '0');
    if (timeoutSeconds > 0) timers.push(setTimeout(() => res.end(), timeoutSeconds * 1000));
    res.on('close', () => {
      unsubscribe();
      this.#watches.delete(watch);
      for (const t of timers) clearTimeout(t);
    });
  }
}

/** The event type a selector-filtered watcher sees: an object entering the selection is ADDED to it. */
function filteredType(change: Change, filter: (m: StoredMetadata) => boolean): string | undefined {
  const now = filter(change.record.metadata);
  if (change.type === 'MODIFIED') {
    const before = change.previous !== undefined && filter(change.previous.metadata);
    if (before && now) return 'MODIFIED';
    if (now) return 'ADDED';
    return before ? 'DELETED' : undefined;
  }
  return now ? change.type : undefined;
}

function selectorFilter(
  resource: ResourceType,
  namespace: string | undefined,
  q: URLSearchParams,
): ((m: StoredMetadata) => boolean) | string {
  const labels = parseLabelSelector(q.get('labelSelector'));
  if (!labels.ok) return `labelSelector: ${labels.reason}`;
  const fields = parseFieldSelector(q.get('fieldSelector'));
  if (!fields.ok) return `fieldSelector: ${fields.reason}`;
  const labelSel: Selector = labels.selector;
  const fieldSel: Selector = fields.selector;
  return (m) =>
    (namespace === undefined || !resource.namespaced || m.namespace === namespace) &&
    matches(labelSel, m.labels ?? {}) &&
    matches(fieldSel, { 'metadata.name': m.name, 'metadata.namespace': m.namespace ?? '' });
}

function parseRoute(pathname: string): Route {
  for (const resource of RESOURCE_TYPES) {
    const prefix = `${groupVersionPath(resource)}/`;
    if (!pathname.startsWith(prefix)) continue;
    const parts = pathname.slice(prefix.length).split('/').map(decodeURIComponent);
    if (
      parts[0] === 'namespaces' &&
      resource.namespaced &&
      parts.length >= 3 &&
      parts[2] === resource.plural
    ) {
      if (parts.length <= 4) return { resource, namespace: parts[1], name: parts[3] };
    } else if (parts[0] === resource.plural && parts.length <= 2) {
      return { resource, namespace: undefined, name: parts[1] };
    }
  }
  return undefined;
}

function encodeContinue(id: string, rv: number, offset: number): string {
  return Buffer.from(JSON.stringify({ id, rv, offset })).toString('base64url');
}

function decodeContinue(token: string): { id: string; offset: number } | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString()) as {
      id?: unknown;
      offset?: unknown;
    };
    return typeof parsed.id === 'string' && typeof parsed.offset === 'number'
      ? { id: parsed.id, offset: parsed.offset }
      : undefined;
  } catch {
    return undefined;
  }
}

/** What ends a watch event after its object. */
const EVENT_END = Buffer.from('}\n');

/** A list of stored objects, as JSON.stringify would write it, from the objects' own encodings. */
function listBody(
  resource: ResourceType,
  metadata: Record<string, unknown>,
  records: readonly StoredRecord[],
): Buffer {
  const parts: Buffer[] = [
    Buffer.from(
      `{"kind":${JSON.stringify(resource.listKind)},"apiVersion":${JSON.stringify(resource.apiVersion)},"metadata":${JSON.stringify(metadata)},"items":[`,
    ),
  ];
  for (const [i, record] of records.entries()) {
    if (i > 0) parts.push(COMMA);
    parts.push(...record.listItem());
  }
  parts.push(LIST_END);
  return Buffer.concat(parts);
}
const COMMA = Buffer.from(',');
const LIST_END = Buffer.from(']}');

function sendJson(
  res: http.ServerResponse,
  code: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  sendBody(res, code, JSON.stringify(body), headers);
}

function sendBody(
  res: http.ServerResponse,
  code: number,
  body: string | Buffer,
  headers: Record<string, string> = {},
): void {
  res.writeHead(code, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

function sendStatus(
  res: http.ServerResponse,
  code: number,
  reason: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  sendJson(res, code, status(code, reason, message), headers);
}

/**
 * A deletion's answer, as kube-apiserver's registries give it: Services (ReturnDeletedObject) answer
 * the deleted object; Nodes and EndpointSlices a Status Success naming it (the generic store's default).
 */
function sendDeleted(res: http.ServerResponse, resource: ResourceType, result: WriteResult): void {
  if (!result.ok || resource.plural === 'services') {
    sendWrite(res, result, 200);
    return;
  }
  const group = resource.apiVersion.includes('/') ? resource.apiVersion.split('/')[0] : '';
  sendJson(res, 200, {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Success',
    details: {
      name: result.record.metadata.name,
      ...(group ? { group } : {}),
      kind: resource.plural,
      uid: result.record.metadata.uid,
    },
  });
}

/**
 * The OpenAPI v2 document, which kubectl fetches (as protobuf) to validate what it creates and to
 * find how to merge what it applies. The stand-in publishes no schemas: an empty document (a
 * protobuf message with no fields is zero bytes). kubectl then skips client-side validation of the
 * three kinds and computes strategic merge patches from its compiled-in types, as it does for any
 * kind a server publishes no schema for. /openapi/v3 is not served (404): kubectl falls back to v2.
 */
function sendOpenApiV2(res: http.ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf',
    'content-length': 0,
  });
  res.end();
}

/**
 * Namespaces are implicit in the stand-in (an object may name any), so every one exists and is
 * Active. Only GET of one is served: kubectl asks for the namespace after a NotFound, to say whether
 * the object or its namespace is missing.
 */
function sendNamespace(res: http.ServerResponse, name: string): void {
  sendJson(res, 200, {
    kind: 'Namespace',
    apiVersion: 'v1',
    metadata: { name, labels: { 'kubernetes.io/metadata.name': name } },
    spec: { finalizers: ['kubernetes'] },
    status: { phase: 'Active' },
  });
}

function sendWrite(res: http.ServerResponse, result: WriteResult, okCode: number): void {
  if (result.ok) sendBody(res, okCode, result.record.json);
  else sendStatus(res, result.code, result.reason, result.message);
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Starts a stand-in API server (on 127.0.0.1 and a free port unless told otherwise). */
export async function startApiServer(options: ApiServerOptions = {}): Promise<StandInApiServer> {
  const server = new StandInApiServer(options);
  await server.start();
  return server;
}
