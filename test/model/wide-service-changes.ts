// One Service with many EndpointSlices and a seeded stream of the changes that move its endpoints
// about (issue 33): an address moving from one slice to another (added to the new one first, so
// for a while two slices hold it, or removed from the old one first), a slice deleted and made
// again, an endpoint ready -> terminating and back, endpoints added and removed, topology hints on
// every endpoint or on none. The model keeps such a port's candidates merged and its lists chunked
// (src/model/candidate-merges.ts, contract/chunked-list.ts); tests compare what it builds step by
// step with a build from scratch.
import { decodeObject } from '../../src/kube/decode.ts';
import type {
  EndpointSlice,
  EndpointSliceEndpoint,
  KubeObject,
  Node,
  Service,
} from '../../src/kube/objects.ts';
import type { ModelCache } from '../../src/model/model-cache.ts';
import { endpoint, node, service, slice, THIS_NODE } from './fixtures.ts';

/** An object as the informer hands it over. */
export function decoded<T extends KubeObject>(raw: T): T {
  const result = decodeObject(raw);
  if (result.kind !== 'object') throw new Error(`fixture does not decode: ${JSON.stringify(result)}`);
  return result.object as T;
}

/** This node, in zone-a (the hints name zone-a and zone-b). */
export const WIDE_NODE: Node = decoded(node(THIS_NODE, { internalIPs: ['192.168.0.1'], zone: 'zone-a' }));

/** Feeds `events` to `cache` as an informer would. */
export function feed(cache: ModelCache, events: readonly SliceEvent[]): void {
  for (const event of events) {
    if (event.kind === 'set') cache.setEndpointSlice(event.slice);
    else cache.deleteEndpointSlice(event.slice);
  }
}

interface Member {
  readonly address: number;
  readonly condition: 'ready' | 'terminating' | 'gone-serving';
  readonly node: string;
}

/** What one step did: slices set (their new content) and slices deleted, in order. */
export type SliceEvent =
  | { readonly kind: 'set'; readonly slice: EndpointSlice }
  | { readonly kind: 'delete'; readonly slice: EndpointSlice };

const SLICES = 24;
const ADDRESSES = 400;

export class WideServiceChanges {
  readonly service: Service;
  /** The slices now, by name. */
  readonly slices = new Map<string, EndpointSlice>();
  readonly #members = new Map<string, Member[]>();
  readonly #pick: (n: number) => number;
  #hinted = false;
  /** A move's second half (the old slice still holding the address), done at a later step. */
  #pending: (() => SliceEvent) | undefined;

  /** `pick`: whole numbers in [0, n) from a seeded source. */
  constructor(pick: (n: number) => number) {
    this.#pick = pick;
    const type = ['ClusterIP', 'NodePort', 'LoadBalancer'][pick(3)]!;
    this.service = decoded(
      service('wide', {
        type,
        clusterIP: '10.96.0.10',
        ports: [
          { name: 'http', port: 80, protocol: 'TCP', ...(type !== 'ClusterIP' && { nodePort: 30080 }) },
        ],
        ...(type !== 'ClusterIP' && pick(2) === 0 && { externalTrafficPolicy: 'Local' }),
        ...(pick(4) === 0 && { internalTrafficPolicy: 'Local' }),
      }),
    );
    let next = 0;
    for (let s = 0; s < SLICES; s++) {
      const members = Array.from({ length: 2 + pick(8) }, () => this.#member(next++));
      this.#members.set(`wide-${s}`, members);
    }
  }

  /** The events that make the first slices. */
  initial(): SliceEvent[] {
    return [...this.#members.keys()].map((name) => this.#set(name));
  }

  /** The events of one random change (one or two slice events). */
  step(): SliceEvent[] {
    const pick = this.#pick;
    if (this.#pending && pick(2) === 0) {
      const finish = this.#pending;
      this.#pending = undefined;
      return [finish()];
    }
    const names = [...this.#members.keys()];
    const name = names[pick(names.length)]!;
    const members = this.#members.get(name)!;
    const what = pick(12);
    if (what < 3 && members.length > 0) return this.#move(name, members);
    if (what < 4) {
      // Deleted, and made again later with other endpoints (an empty slice is deleted).
      this.#members.set(name, []);
      return [this.#set(name)];
    }
    if (what < 7 && members.length > 0) {
      const k = pick(members.length);
      const m = members[k]!;
      const condition = (['ready', 'terminating', 'gone-serving'] as const)[pick(3)]!;
      members[k] = { ...m, condition };
      return [this.#set(name)];
    }
    if (what < 9) {
      members.push(this.#member(pick(ADDRESSES)));
      return [this.#set(name)];
    }
    if (what < 11 && members.length > 0) {
      members.splice(pick(members.length), 1);
      return [this.#set(name)];
    }
    // Hints on every endpoint or on none: every slice changes.
    this.#hinted = !this.#hinted;
    return names.map((other) => this.#set(other));
  }

  /** One address to another slice: added there first, or taken out here first. */
  #move(from: string, members: Member[]): SliceEvent[] {
    const pick = this.#pick;
    const names = [...this.#members.keys()].filter((n) => n !== from);
    const to = names[pick(names.length)]!;
    const [moved] = members.splice(pick(members.length), 1);
    const halves = [
      () => this.#set(from),
      () => {
        this.#members.get(to)!.push(moved!);
        return this.#set(to);
      },
    ];
    if (pick(2) === 0) halves.reverse();
    // Both in this step, or the second at a later one (a move still half done is finished first).
    const finished = this.#pending ? [this.#pending()] : [];
    this.#pending = undefined;
    if (pick(2) === 0) return [...finished, halves[0]!(), halves[1]!()];
    const first = halves[0]!();
    this.#pending = halves[1];
    return [...finished, first];
  }

  #member(address: number): Member {
    return { address: address % ADDRESSES, condition: 'ready', node: [THIS_NODE, 'node-2'][this.#pick(2)]! };
  }

  #set(name: string): SliceEvent {
    const members = this.#members.get(name)!;
    const made = decoded(
      slice(
        'wide',
        members.map((m) => this.#endpoint(m)),
        { name },
      ),
    );
    if (members.length === 0) {
      this.slices.delete(name);
      return { kind: 'delete', slice: made };
    }
    this.slices.set(name, made);
    return { kind: 'set', slice: made };
  }

  #endpoint(m: Member): EndpointSliceEndpoint {
    const conditions = {
      ready: { ready: true, terminating: false },
      terminating: { ready: false, serving: true, terminating: true },
      'gone-serving': { ready: false, serving: false, terminating: true },
    }[m.condition];
    return endpoint(`10.244.${m.address >> 8}.${m.address & 255}`, {
      ...conditions,
      nodeName: m.node,
      ...(this.#hinted && { zones: [m.address % 3 === 0 ? 'zone-b' : 'zone-a'] }),
    });
  }
}
