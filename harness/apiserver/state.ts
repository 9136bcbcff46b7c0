// The stand-in API server's cluster state: objects per resource, one resourceVersion counter shared
// by all resources (as etcd's revision is), and a bounded history of changes so that watches can
// resume from a recent resourceVersion and older ones are answered "410 Expired". Objects are kept
// encoded (StoredRecord), as kube-apiserver's watch cache keeps each event's encoding.

import { objectKey, type ResourceType } from '../../src/kube/resources.ts';

/** An object as the API server holds it: JSON, with metadata stamped by the server. */
export interface StoredObject {
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly resourceVersion: string;
    readonly uid: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly [field: string]: unknown;
  };
  readonly [field: string]: unknown;
}

/** What the server reads of a stored object without decoding it: selectors, writes, deletions. */
export interface StoredMetadata {
  readonly name: string;
  readonly namespace?: string;
  readonly resourceVersion: string;
  readonly uid: string;
  readonly creationTimestamp?: unknown;
  readonly labels?: Readonly<Record<string, string>>;
}

/**
 * An object as the server keeps it: its JSON as bytes, which live outside V8's heap, and the
 * metadata selectors and writes read. Kept as objects, each write's object graph survived V8's young
 * collections (it stays in the store and the watch history), so at 1,000 writes a second every
 * scavenge copied them: pauses of 50–107 ms that each request meeting one waited out
 * (docs/benchmarks-log.md, "The rollout's tail"). Encoded once, it is also what every watcher, GET
 * and list sends, as kube-apiserver encodes a watch cache event once for all its watchers.
 */
export class StoredRecord {
  /** The object with its kind and apiVersion first: a GET's, a write's and a watch event's body. */
  readonly json: Buffer;
  readonly metadata: StoredMetadata;
  /** Where the object's own fields start in json (a list's items carry no kind or apiVersion). */
  readonly #fieldsAt: number;

  constructor(resource: ResourceType, object: StoredObject) {
    const head = `{"kind":${JSON.stringify(resource.kind)},"apiVersion":${JSON.stringify(resource.apiVersion)},`;
    // An object always has metadata, so its JSON is never `{}`: `{` gives way to the head.
    this.json = Buffer.from(head + JSON.stringify(object).slice(1));
    this.#fieldsAt = Buffer.byteLength(head);
    const { name, namespace, resourceVersion, uid, creationTimestamp, labels } = object.metadata;
    this.metadata = {
      name,
      resourceVersion,
      uid,
      ...(namespace === undefined ? {} : { namespace }),
      ...(creationTimestamp === undefined ? {} : { creationTimestamp }),
      // A copy: the caller's object may change after the write; the JSON above will not.
      ...(labels === undefined ? {} : { labels: { ...labels } }),
    };
  }

  /** The object as a list's item (without kind and apiVersion): its two parts, to send as they are. */
  listItem(): readonly [Buffer, Buffer] {
    return [OPEN_BRACE, this.json.subarray(this.#fieldsAt)];
  }

  /** The object, decoded anew: a copy its caller may change. */
  object(): StoredObject {
    return JSON.parse(`{${this.json.toString('utf8', this.#fieldsAt)}`) as StoredObject;
  }
}

const OPEN_BRACE = Buffer.from('{');

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change {
  readonly rv: number;
  readonly resource: ResourceType['plural'];
  readonly type: ChangeType;
  readonly record: StoredRecord;
  /** The object before a MODIFIED change, so a selector-filtered watch can tell entering from leaving. */
  readonly previous?: StoredRecord;
}

export type WriteResult =
  | { readonly ok: true; readonly record: StoredRecord }
  | { readonly ok: false; readonly code: 400 | 404 | 409; readonly reason: string; readonly message: string };

export interface Snapshot {
  readonly rv: number;
  readonly records: readonly StoredRecord[];
}

type Input = {
  readonly metadata?: {
    readonly name?: unknown;
    readonly namespace?: unknown;
    readonly creationTimestamp?: unknown;
  };
  readonly [f: string]: unknown;
};

export class ClusterState {
  #rv: number;
  /** Watches may resume from any rv >= this: every change after it is still in #history. */
  #oldestRv: number;
  readonly #historyLimit: number;
  #history: Change[] = [];
  readonly #objects = new Map<string, Map<string, StoredRecord>>();
  readonly #listeners = new Set<(change: Change) => void>();
  #uid = 0;

  constructor(options: { readonly historyLimit?: number; readonly initialRv?: number } = {}) {
    this.#historyLimit = options.historyLimit ?? 10_000;
    this.#rv = options.initialRv ?? 1000;
    this.#oldestRv = this.#rv;
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  get oldestResourceVersion(): number {
    return this.#oldestRv;
  }

  #map(resource: ResourceType): Map<string, StoredRecord> {
    let m = this.#objects.get(resource.plural);
    if (!m) {
      m = new Map();
      this.#objects.set(resource.plural, m);
    }
    return m;
  }

  record(resource: ResourceType, namespace: string | undefined, name: string): StoredRecord | undefined {
    return this.#map(resource).get(
      objectKey({ name, namespace: resource.namespaced ? namespace : undefined }),
    );
  }

  /** The object, decoded: a copy. */
  get(resource: ResourceType, namespace: string | undefined, name: string): StoredObject | undefined {
    return this.record(resource, namespace, name)?.object();
  }

  /** The current objects of a resource, sorted by key (the order a chunked list pages through). */
  snapshot(resource: ResourceType): Snapshot {
    const m = this.#map(resource);
    const keys = [...m.keys()].sort();
    return { rv: this.#rv, records: keys.map((k) => m.get(k)!) };
  }

  create(resource: ResourceType, input: Input): WriteResult {
    return this.#write(resource, input, 'create');
  }

  update(resource: ResourceType, input: Input): WriteResult {
    return this.#write(resource, input, 'update');
  }

  /** Create or update, whichever applies (what the lab and the random tests want). */
  apply(resource: ResourceType, input: Input): WriteResult {
    return this.#write(resource, input, 'apply');
  }

  delete(resource: ResourceType, namespace: string | undefined, name: string): WriteResult {
    const m = this.#map(resource);
    const key = objectKey({ name, namespace: resource.namespaced ? namespace : undefined });
    const old = m.get(key);
    if (!old) return notFound(resource, name);
    m.delete(key);
    const rv = ++this.#rv;
    const object = old.object();
    const record = new StoredRecord(resource, {
      ...object,
      metadata: { ...object.metadata, resourceVersion: String(rv) },
    });
    this.#record({ rv, resource: resource.plural, type: 'DELETED', record });
    return { ok: true, record };
  }

  #write(resource: ResourceType, input: Input, mode: 'create' | 'update' | 'apply'): WriteResult {
    const name = input.metadata?.name;
    if (typeof name !== 'string' || name === '') {
      return { ok: false, code: 400, reason: 'Invalid', message: 'metadata.name: Required value' };
    }
    let namespace: string | undefined;
    if (resource.namespaced) {
      const ns = input.metadata?.namespace;
      namespace = typeof ns === 'string' && ns !== '' ? ns : 'default';
    }
    const m = this.#map(resource);
    const key = objectKey({ name, namespace });
    const previous = m.get(key);
    if (mode === 'create' && previous) {
      return {
        ok: false,
        code: 409,
        reason: 'AlreadyExists',
        message: `${resource.plural} "${name}" already exists`,
      };
    }
    if (mode === 'update' && !previous) return notFound(resource, name);
    const rv = ++this.#rv;
    const { apiVersion: _a, kind: _k, ...rest } = input;
    const object: StoredObject = {
      ...rest,
      metadata: {
        ...input.metadata,
        name,
        ...(namespace === undefined ? {} : { namespace }),
        uid: previous?.metadata.uid ?? `00000000-0000-4000-8000-${String(++this.#uid).padStart(12, '0')}`,
        creationTimestamp: creationTimestamp(input.metadata, previous),
        resourceVersion: String(rv),
      } as StoredObject['metadata'],
    };
    const record = new StoredRecord(resource, object);
    m.set(key, record);
    this.#record(
      previous
        ? { rv, resource: resource.plural, type: 'MODIFIED', record, previous }
        : { rv, resource: resource.plural, type: 'ADDED', record },
    );
    return { ok: true, record };
  }

  #record(change: Change): void {
    this.#history.push(change);
    if (this.#history.length > this.#historyLimit) {
      const dropped = this.#history.splice(0, this.#history.length - this.#historyLimit);
      this.#oldestRv = dropped[dropped.length - 1]!.rv;
    }
    for (const listener of this.#listeners) listener(change);
  }

  /** The changes of one resource after rv, or 'expired' when history no longer reaches back that far. */
  changesSince(resource: ResourceType, rv: number): readonly Change[] | 'expired' {
    if (rv < this.#oldestRv) return 'expired';
    return this.#history.filter((c) => c.rv > rv && c.resource === resource.plural);
  }

  /** Forget all history, as etcd compaction does: every older resourceVersion becomes too old. */
  compact(): void {
    this.#history = [];
    this.#oldestRv = this.#rv;
  }

  /** Calls listener synchronously for every change from now on; returns the unsubscribe function. */
  subscribe(listener: (change: Change) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

/**
 * Set by the server as kube-apiserver does (at creation, in whole seconds, kept by updates), except
 * that a given one is kept: tests and the lab replay cluster states in which age decides (the older
 * Service keeps a contested address).
 */
function creationTimestamp(given: Input['metadata'], previous: StoredRecord | undefined): string {
  const ts = given?.creationTimestamp ?? previous?.metadata.creationTimestamp;
  return typeof ts === 'string'
    ? ts
    : new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function notFound(resource: ResourceType, name: string): WriteResult {
  return { ok: false, code: 404, reason: 'NotFound', message: `${resource.plural} "${name}" not found` };
}
