// The informer's cache: decoded slim objects (or only their heads) keyed namespace/name.
// Consumers read it; only the informer writes it.

import type { ObjectHead } from './objects.ts';

export interface ReadonlyStore<T extends ObjectHead> {
  get(key: string): T | undefined;
  has(key: string): boolean;
  /** All objects, in key order, so that consumers building state from them are deterministic. */
  list(): T[];
  keys(): IterableIterator<string>;
  readonly size: number;
}

export class Store<T extends ObjectHead> implements ReadonlyStore<T> {
  #items = new Map<string, T>();

  get(key: string): T | undefined {
    return this.#items.get(key);
  }

  has(key: string): boolean {
    return this.#items.has(key);
  }

  list(): T[] {
    return [...this.#items.keys()].sort().map((k) => this.#items.get(k)!);
  }

  keys(): IterableIterator<string> {
    return this.#items.keys();
  }

  get size(): number {
    return this.#items.size;
  }

  set(key: string, object: T): T | undefined {
    const old = this.#items.get(key);
    this.#items.set(key, object);
    return old;
  }

  delete(key: string): T | undefined {
    const old = this.#items.get(key);
    this.#items.delete(key);
    return old;
  }
}
