// Memory: tens of thousands of decoded objects repeat the same small parts (port lists, IP family
// lists, topology hints). Each decoded object gets one shared, frozen instance of each distinct
// part instead of a copy of its own, for the parts a consumer keeps: the model keeps Services
// and the hints of slice endpoints (not the slices, nor their endpoints' conditions). Shared parts
// are frozen so that a consumer that wrongly mutates one fails loudly instead of silently
// changing many objects.

import type { EndpointSlice, EndpointSliceEndpoint, KubeObject, Service } from './objects.ts';

export class SharedParts {
  #table = new Map<string, unknown>();
  readonly #limit: number;

  /** limit bounds the table; when full it starts over (parts already shared stay shared). */
  constructor(limit = 4096) {
    this.#limit = limit;
  }

  /** One frozen instance per distinct (JSON-equal) value. */
  share<T>(value: T): T {
    if (value === undefined || value === null) return value;
    const key = JSON.stringify(value);
    const found = this.#table.get(key);
    if (found !== undefined) return found as T;
    if (this.#table.size >= this.#limit) this.#table.clear();
    deepFreeze(value);
    this.#table.set(key, value);
    return value;
  }

  /** The same object with its repetitive parts replaced by shared instances. */
  compact<T extends KubeObject>(object: T): T {
    switch (object.kind) {
      case 'EndpointSlice':
        return this.#slice(object) as T;
      case 'Service':
        return this.#service(object) as T;
      default:
        return object;
    }
  }

  #slice(slice: EndpointSlice): EndpointSlice {
    if (!slice.endpoints?.some((endpoint) => endpoint.hints)) return slice;
    return { ...slice, endpoints: slice.endpoints.map((e) => this.#endpoint(e)) };
  }

  #endpoint(endpoint: EndpointSliceEndpoint): EndpointSliceEndpoint {
    return endpoint.hints ? { ...endpoint, hints: this.share(endpoint.hints) } : endpoint;
  }

  #service(service: Service): Service {
    const { spec } = service;
    return {
      ...service,
      spec: {
        ...spec,
        ...(spec.ports ? { ports: this.share(spec.ports) } : {}),
        ...(spec.ipFamilies ? { ipFamilies: this.share(spec.ipFamilies) } : {}),
      },
    };
  }
}

function deepFreeze(value: unknown): void {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const child of Object.values(value)) deepFreeze(child);
}
