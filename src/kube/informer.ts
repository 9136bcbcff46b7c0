// A generic informer: keeps a Store of one resource equal to the API server's state and tells
// listeners what changed. list (paginated) → watch from the list's resourceVersion → on a normal
// end, watch again; on 410 Expired, relist: what the list brings is applied as it arrives and
// what it never brought is deleted at its end (deletions missed meanwhile become delete events);
// on errors, capped backoff with jitter honouring Retry-After.
// Watch-list (sendInitialEvents) replaces the paginated list when the server offers it.
//
// The store may keep less than the whole object (the `store` option, a VersionStore): a consumer
// that keeps what it needs from each event (the model) needs no second copy of every object here.

import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Slicer } from '../../contract/base/work-slices.ts';
import { Backoff, type BackoffOptions } from './backoff.ts';
import { type ApiError, formatApiError, isExpired, type KubeApi, type WatchItem } from './client.ts';
import type { InformerMetrics } from './informer-metrics.ts';
import type { KubeObject, ObjectHead } from './objects.ts';
import { objectKey, type ResourceType } from './resources.ts';
import { SharedParts } from './shared-parts.ts';
import { type InformerStore, type ReadonlyStore, Store } from './store.ts';

/** The shape of decodeObject (src/kube/decode.ts): slims and validates one API object. */
export type Decoder = (
  raw: unknown,
) =>
  | { readonly kind: 'object'; readonly object: KubeObject }
  | { readonly kind: 'invalid'; readonly problem: { readonly object: string; readonly reason: string } }
  | { readonly kind: 'ignored'; readonly reason: string };

/**
 * `old` and deleted objects are what the store kept of them (K). `key` is the store's key string
 * (namespace/name): a consumer keying by it keeps one string, not one more per object (~1 MiB at
 * 30,000 slices).
 */
export type InformerEvent<T extends KubeObject, K extends ObjectHead = T> =
  | { readonly type: 'add'; readonly key: string; readonly object: T }
  | { readonly type: 'update'; readonly key: string; readonly old: K; readonly object: T }
  | { readonly type: 'delete'; readonly key: string; readonly object: K };

export interface InformerOptions<T extends KubeObject = KubeObject, K extends ObjectHead = T> {
  readonly api: KubeApi;
  /** Where the informer keeps what it knows; a Store of whole objects when absent. */
  readonly store?: InformerStore<T, K>;
  readonly resource: ResourceType;
  readonly decode: Decoder;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  readonly logger: Logger;
  readonly metrics: InformerMetrics;
  /** Items per list page (limit); default 500 as client-go. */
  readonly pageSize?: number;
  readonly backoff?: BackoffOptions;
  /** Try watch-list first; default true. Falls back to list+watch when the server refuses it. */
  readonly watchList?: boolean;
  /** Watch timeoutSeconds is drawn from this range so that watches of many nodes do not end together. */
  readonly watchTimeoutSeconds?: { readonly min: number; readonly max: number };
  /**
   * A watch still open this long after its timeoutSeconds is abandoned: the server would have ended
   * it, so the connection is half-open (the far end vanished without a FIN). Default 30 s.
   */
  readonly watchGraceMs?: number;
  /** Longest Retry-After honoured, so a confused server cannot park us for hours; default 300 s. */
  readonly maxRetryAfterSeconds?: number;
  readonly random?: () => number;
}

const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

/** How one watch ended, which decides what the loop does next. */
type WatchEnd =
  /** empty: nothing at all arrived, which a healthy server does not do (it sends bookmarks). */
  | { readonly kind: 'closed'; readonly empty: boolean }
  | { readonly kind: 'expired' }
  | { readonly kind: 'unsupported'; readonly error: ApiError }
  | { readonly kind: 'failed'; readonly error: ApiError }
  | { readonly kind: 'stopped' };

interface RawMeta {
  readonly metadata?: {
    readonly name?: unknown;
    readonly namespace?: unknown;
    readonly resourceVersion?: unknown;
    readonly annotations?: Record<string, unknown>;
  };
  readonly kind?: unknown;
  readonly apiVersion?: unknown;
}

export class Informer<T extends KubeObject, K extends ObjectHead = T> {
  readonly #store: InformerStore<T, K>;
  readonly #options: InformerOptions<T, K>;
  readonly #resource: ResourceType;
  readonly #log: Logger;
  readonly #backoff: Backoff;
  readonly #random: () => number;
  readonly #listeners = new Set<(event: InformerEvent<T, K>) => void>();
  readonly #abort = new AbortController();
  readonly #shared = new SharedParts();
  #useWatchList: boolean;
  #synced = false;
  /** How the server refused an optional resource (404 or 403), until it answers otherwise. */
  #unavailable: number | undefined;
  #syncWaiters: (() => void)[] = [];
  #running: Promise<void> | undefined;

  constructor(options: InformerOptions<T, K>) {
    this.#options = options;
    // Without a store of its own the informer keeps whole objects: K is T.
    this.#store = options.store ?? (new Store<T>() as unknown as InformerStore<T, K>);
    this.#resource = options.resource;
    this.#log = options.logger.child({ resource: options.resource.plural });
    this.#random = options.random ?? Math.random;
    this.#backoff = new Backoff({ random: this.#random, ...options.backoff });
    this.#useWatchList = options.watchList ?? true;
  }

  get store(): ReadonlyStore<K> {
    return this.#store;
  }

  /** Listeners run synchronously, after the store already holds the change. Returns unsubscribe. */
  onChange(listener: (event: InformerEvent<T, K>) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  /** Resolves once the store first holds a complete list; rejects if the signal aborts first. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal?.reason ?? new Error('aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#syncWaiters.push(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  start(): void {
    if (this.#running) throw new Error(`informer for ${this.#resource.plural} already started`);
    this.#running = this.#run();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#running;
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    // undefined: the store must be rebuilt from a full list before watching.
    let rv: string | undefined;
    let relistReason = 'initial';
    while (!signal.aborted) {
      if (rv === undefined && !this.#useWatchList) {
        this.#count('relists', relistReason);
        const listed = await this.#list();
        if (!listed.ok) {
          if (!signal.aborted) await this.#fail(listed.error, 'list');
          continue;
        }
        rv = listed.rv;
        this.#unavailable = undefined;
        this.#backoff.reset();
      }
      const watchList = rv === undefined;
      if (watchList) this.#count('relists', relistReason);
      const session = { rv };
      const end = await this.#watch(session);
      rv = session.rv;
      switch (end.kind) {
        case 'stopped':
          return;
        case 'closed':
          this.#options.metrics.watchRestarts.inc({ resource: this.#resource.plural, reason: 'closed' });
          // A server (or proxy) that ends every watch at once must not make us spin.
          if (end.empty) await this.#pause(this.#backoff.next());
          break;
        case 'expired':
          this.#log.info({ resourceVersion: rv }, 'watch history expired; relisting');
          this.#count('errors', 'expired');
          rv = undefined;
          relistReason = 'expired';
          break;
        case 'unsupported':
          this.#log.info(
            { error: formatApiError(end.error) },
            'server refused watch-list; using list and watch',
          );
          this.#useWatchList = false;
          break;
        case 'failed':
          this.#options.metrics.watchRestarts.inc({ resource: this.#resource.plural, reason: 'error' });
          await this.#fail(end.error, 'watch');
          break;
      }
    }
  }

  /** Pages through the whole collection; the store becomes exactly what it lists. */
  async #list(): Promise<{ ok: true; rv: string } | { ok: false; error: ApiError }> {
    const listed = new Set<string>();
    // A page is hundreds of objects, each decoded and handed to the listeners: in slices.
    const slicer = new Slicer();
    let cont: string | undefined;
    for (;;) {
      const page = await this.#options.api.list(
        this.#resource,
        {
          ...this.#selectors(),
          limit: this.#options.pageSize ?? 500,
          ...(cont ? { continue: cont } : {}),
        },
        this.#abort.signal,
      );
      if (!page.ok) {
        if (cont && isExpired(page.error)) {
          // The snapshot behind the continue token is gone: start the list over.
          this.#log.info('list continue token expired; listing from the start');
          this.#count('errors', 'expired');
          listed.clear();
          cont = undefined;
          continue;
        }
        return page;
      }
      for (const raw of page.value.items) {
        this.#applyListed(listed, raw);
        await slicer.pause();
      }
      cont = page.value.continue;
      if (!cont) {
        this.#completeRelist(listed);
        return { ok: true, rv: page.value.resourceVersion };
      }
    }
  }

  /**
   * One watch. Without session.rv it is a watch-list: its events up to the initial-events-end
   * bookmark are a relist. session.rv follows the stream.
   */
  async #watch(session: { rv: string | undefined }): Promise<WatchEnd> {
    const signal = this.#abort.signal;
    const initial = session.rv === undefined ? new Set<string>() : undefined;
    const { min, max } = this.#options.watchTimeoutSeconds ?? { min: 300, max: 600 };
    const timeoutSeconds = min + Math.floor(this.#random() * (max - min + 1));
    const watchdog = AbortSignal.timeout(timeoutSeconds * 1000 + (this.#options.watchGraceMs ?? 30_000));
    const started = await this.#options.api.watch(
      this.#resource,
      {
        ...this.#selectors(),
        ...(initial ? { sendInitialEvents: true } : { resourceVersion: session.rv }),
        allowWatchBookmarks: true,
        timeoutSeconds,
      },
      AbortSignal.any([signal, watchdog]),
    );
    if (signal.aborted) return { kind: 'stopped' };
    if (!started.ok) return this.#classifyStartError(started.error, initial !== undefined);
    let pending = initial;
    let sawEvent = false;
    // Items already read come without a turn of the event loop in between (a watch-list of 30k
    // objects arrives in megabyte reads): handled in slices, so /healthz is answered meanwhile.
    const slicer = new Slicer();
    for await (const item of started.value) {
      await slicer.pause();
      if (signal.aborted) return { kind: 'stopped' };
      if (item.kind === 'error' && watchdog.aborted) {
        const message = `watch still open ${timeoutSeconds} s after its timeout; connection presumed dead`;
        return { kind: 'failed', error: { kind: 'network', message } };
      }
      const end = this.#handleItem(item, session, pending);
      if (end) return end;
      if (!sawEvent) {
        sawEvent = true;
        this.#unavailable = undefined;
        this.#backoff.reset();
      }
      if (pending && session.rv !== undefined) {
        // The initial-events-end bookmark arrived: the watch-list is complete.
        this.#completeRelist(pending);
        pending = undefined;
      }
    }
    if (signal.aborted) return { kind: 'stopped' };
    // A watch-list that ended before its initial events completed must be done again.
    if (pending) session.rv = undefined;
    return { kind: 'closed', empty: !sawEvent };
  }

  #classifyStartError(error: ApiError, watchList: boolean): WatchEnd {
    if (isExpired(error)) return { kind: 'expired' };
    // A server without watch-list answers the unknown parameters with 400/422 (Invalid, BadRequest).
    if (watchList && error.kind === 'status' && (error.status === 400 || error.status === 422)) {
      return { kind: 'unsupported', error };
    }
    return { kind: 'failed', error };
  }

  /** Applies one watch item. Returns how the watch ended when the item ends it. */
  #handleItem(
    item: WatchItem,
    session: { rv: string | undefined },
    listed: Set<string> | undefined,
  ): WatchEnd | undefined {
    if (item.kind === 'error') return { kind: 'failed', error: item.error };
    if (item.kind === 'malformed') {
      this.#count('errors', 'malformed');
      this.#log.warn({ line: item.line, reason: item.reason }, 'malformed watch line skipped');
      return undefined;
    }
    this.#options.metrics.events.inc({ resource: this.#resource.plural, type: item.type });
    const raw = item.object as RawMeta & { code?: unknown; reason?: unknown; message?: unknown };
    const rv = typeof raw.metadata?.resourceVersion === 'string' ? raw.metadata.resourceVersion : undefined;
    switch (item.type) {
      case 'ADDED':
      case 'MODIFIED':
        if (listed) this.#applyListed(listed, raw);
        else this.#apply(raw);
        break;
      case 'DELETED':
        listed?.delete(rawKey(raw));
        this.#remove(rawKey(raw));
        break;
      case 'BOOKMARK':
        // During a watch-list only the marked bookmark makes the stream resumable.
        if (listed && raw.metadata?.annotations?.[INITIAL_EVENTS_END] !== 'true') return undefined;
        if (rv !== undefined) session.rv = rv;
        return undefined;
      case 'ERROR': {
        const code = typeof raw.code === 'number' ? raw.code : 500;
        const error: ApiError = {
          kind: 'status',
          status: code,
          reason: typeof raw.reason === 'string' ? raw.reason : 'Unknown',
          message: typeof raw.message === 'string' ? raw.message : '',
        };
        return isExpired(error) ? { kind: 'expired' } : { kind: 'failed', error };
      }
      default:
        this.#count('errors', 'malformed');
        this.#log.warn({ type: item.type }, 'watch event of unknown type skipped');
        return undefined;
    }
    if (!listed && rv !== undefined) session.rv = rv;
    return undefined;
  }

  /**
   * One object of a relist, applied now so that the decoded objects of a large list never pile
   * up: an unchanged resourceVersion is not an event; an object that no longer decodes is dropped.
   */
  #applyListed(listed: Set<string>, raw: unknown): void {
    const object = this.#decode(raw);
    if (!object) {
      const key = rawKey(raw as RawMeta | null);
      listed.delete(key);
      this.#remove(key);
      return;
    }
    const key = objectKey(object.metadata);
    listed.add(key);
    const old = this.#store.get(key);
    const rv = object.metadata.resourceVersion;
    if (rv && old?.metadata.resourceVersion === rv) return;
    this.#store.set(key, object);
    this.#emit(old ? { type: 'update', key, old, object } : { type: 'add', key, object });
  }

  #decode(raw: unknown): T | undefined {
    const r = raw as RawMeta;
    // List items come without kind and apiVersion; the decoder needs them to know what it reads.
    // Anything that is not an object (a null item) goes to the decoder as it is: invalid, not a crash.
    const typed =
      typeof raw === 'object' && raw !== null && r.kind === undefined
        ? { ...r, kind: this.#resource.kind, apiVersion: this.#resource.apiVersion }
        : raw;
    const result = this.#options.decode(typed);
    if (result.kind === 'object' && result.object.kind === this.#resource.kind) {
      return this.#shared.compact(result.object as T);
    }
    if (result.kind === 'ignored') {
      this.#log.debug({ key: rawKey(r), reason: result.reason }, 'object ignored');
      return undefined;
    }
    const reason =
      result.kind === 'invalid'
        ? result.problem.reason
        : `kind ${result.object.kind} in ${this.#resource.plural}`;
    this.#count('errors', 'invalid');
    this.#log.warn({ key: rawKey(r), reason }, 'invalid object skipped');
    return undefined;
  }

  /**
   * Applies a watched add/update. An object that no longer decodes is dropped from the store: a
   * stale earlier version would keep programming rules the server no longer describes.
   */
  #apply(raw: RawMeta): void {
    const object = this.#decode(raw);
    if (!object) {
      this.#remove(rawKey(raw));
      return;
    }
    const key = objectKey(object.metadata);
    const old = this.#store.set(key, object);
    this.#emit(old ? { type: 'update', key, old, object } : { type: 'add', key, object });
  }

  #remove(key: string): void {
    const old = this.#store.delete(key);
    if (old) this.#emit({ type: 'delete', key, object: old });
  }

  /** A relist is complete: what it did not list is gone. */
  #completeRelist(listed: ReadonlySet<string>): void {
    for (const key of [...this.#store.keys()]) if (!listed.has(key)) this.#remove(key);
    if (!this.#synced) {
      this.#synced = true;
      this.#log.info({ objects: this.#store.size }, 'synced');
      for (const wake of this.#syncWaiters) wake();
      this.#syncWaiters = [];
    }
  }

  #emit(event: InformerEvent<T, K>): void {
    for (const listener of this.#listeners) listener(event);
  }

  async #fail(error: ApiError, during: 'list' | 'watch'): Promise<void> {
    if (
      this.#resource.optional !== undefined &&
      error.kind === 'status' &&
      (error.status === 404 || error.status === 403)
    ) {
      if (this.#unavailable !== error.status) this.#sayUnavailable(error);
      this.#unavailable = error.status;
      this.#completeRelist(new Set());
      await this.#pause(this.#backoff.next());
      return;
    }
    this.#unavailable = undefined;
    this.#count('errors', errorReason(error));
    let delay = this.#backoff.next();
    if (error.kind === 'status' && error.retryAfterSeconds !== undefined) {
      delay = Math.max(
        delay,
        Math.min(error.retryAfterSeconds, this.#options.maxRetryAfterSeconds ?? 300) * 1000,
      );
    }
    this.#log.warn({ error: formatApiError(error), retryInMs: delay }, `${during} failed`);
    await this.#pause(delay);
  }

  /**
   * Once while it lasts: which resource, what kproxy does without it, and what would make it
   * available. A 404 is what every server before the resource's release answers (info); a 403 is
   * an RBAC role that does not grant it (warn: the operator can fix it).
   */
  #sayUnavailable(error: ApiError & { kind: 'status' }): void {
    const { apiVersion, plural, optional } = this.#resource;
    const without = `taken as empty, looked for again after a backoff; meanwhile ${optional?.without}`;
    if (error.status === 404) {
      this.#log.info(`the server does not serve this resource (${apiVersion} ${plural}): ${without}`);
      return;
    }
    const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
    const rule = `{apiGroups: ["${group}"], resources: ["${plural}"], verbs: ["list", "watch"]}`;
    this.#log.warn(
      { error: formatApiError(error) },
      `the server forbids kproxy to read ${apiVersion} ${plural} (403): ${without}; to let it, add ${rule} to the ClusterRole bound to kproxy's user (system:node-proxier in a cluster made before the resource existed lacks it)`,
    );
  }

  async #pause(ms: number): Promise<void> {
    try {
      await sleep(ms, undefined, { signal: this.#abort.signal });
    } catch {
      // Aborted by stop(): the loop checks the signal.
    }
  }

  #selectors(): { labelSelector?: string; fieldSelector?: string } {
    const { labelSelector, fieldSelector } = this.#options;
    return { ...(labelSelector ? { labelSelector } : {}), ...(fieldSelector ? { fieldSelector } : {}) };
  }

  #count(metric: 'relists' | 'errors', reason: string): void {
    this.#options.metrics[metric].inc({ resource: this.#resource.plural, reason });
  }
}

function rawKey(raw: RawMeta | null): string {
  const metadata = raw?.metadata;
  const name = typeof metadata?.name === 'string' ? metadata.name : '';
  const namespace = typeof metadata?.namespace === 'string' ? metadata.namespace : undefined;
  return objectKey({ name, namespace });
}

export function errorReason(error: ApiError): string {
  if (error.kind !== 'status') return error.kind;
  if (error.status === 410) return 'expired';
  if (error.status === 429) return 'throttled';
  if (error.status === 401) return 'unauthorized';
  if (error.status === 403) return 'forbidden';
  if (error.status >= 500) return 'server';
  return 'client';
}
