// The stand-in API server's cluster state: objects per resource, one resourceVersion counter shared
// by all resources (as etcd's revision is), and a bounded history of changes so that watches can
// resume from a recent resourceVersion and older ones are answered "410 Expired".

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

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change {
  readonly rv: number;
  readonly resource: ResourceType['plural'];
  readonly type: ChangeType;
  readonly object: StoredObject;
  /** The object before a MODIFIED change, so a selector-filtered watch can tell entering from leaving. */
  readonly previous?: StoredObject;
}

export type WriteResult =
  | { readonly ok: true; readonly object: StoredObject }
  | { readonly ok: false; readonly code: 400 | 404 | 409; readonly reason: string; readonly message: string };

export interface Snapshot {
  readonly rv: number;
  readonly items: readonly StoredObject[];
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
  readonly #objects = new Map<string, Map<string, StoredObject>>();
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

  #map(resource: ResourceType): Map<string, StoredObject> {
    let m = this.#objects.get(resource.plural);
    if (!m) {
      m = new Map();
      this.#objects.set(resource.plural, m);
    }
    return m;
  }

  get(resource: ResourceType, namespace: string | undefined, name: string): StoredObject | undefined {
    return this.#map(resource).get(
      objectKey({ name, namespace: resource.namespaced ? namespace : undefined }),
    );
  }

  /** The current objects of a resource, sorted by key (the order a chunked list pages through). */
  snapshot(resource: ResourceType): Snapshot {
    const m = this.#map(resource);
    const keys = [...m.keys()].sort();
    return { rv: this.#rv, items: keys.map((k) => m.get(k)!) };
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
    const object = { ...old, metadata: { ...old.metadata, resourceVersion: String(rv) } };
    this.#record({ rv, resource: resource.plural, type: 'DELETED', object });
    return { ok: true, object };
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
    m.set(key, object);
    this.#record(
      previous
        ? { rv, resource: resource.plural, type: 'MODIFIED', object, previous }
        : { rv, resource: resource.plural, type: 'ADDED', object },
    );
    return { ok: true, object };
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
function creationTimestamp(given: Input['metadata'], previous: StoredObject | undefined): string {
  const ts = given?.creationTimestamp ?? previous?.metadata.creationTimestamp;
  return typeof ts === 'string'
    ? ts
    : new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function notFound(resource: ResourceType, name: string): WriteResult {
  return { ok: false, code: 404, reason: 'NotFound', message: `${resource.plural} "${name}" not found` };
}
