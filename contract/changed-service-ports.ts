// The service ports an incremental sync must touch between two states of one family.
import { isDeepStrictEqual } from 'node:util';
import { walkPaired } from './chunked-list.ts';
import { candidateChanges } from './layered-port-map.ts';
import type { EndpointList, ProxyState, ServicePort, ServicePortKey } from './proxy-state.ts';

const NONE: ReadonlyMap<ServicePortKey, ServicePort> = new Map();

/**
 * Keys of service ports added, removed, or different in any field (endpoints included). Node
 * settings are not compared: a change there calls for a full sync, which the caller decides.
 * States from the ModelCache share unchanged ports by identity and layer their maps over a common
 * base, so comparing consecutive ones looks only at the ports that were recomputed.
 */
export function changedServicePorts(
  prev: ProxyState | undefined,
  next: ProxyState | undefined,
): ReadonlySet<ServicePortKey> {
  const changed = new Set<ServicePortKey>();
  const before = prev?.servicePorts ?? NONE;
  const after = next?.servicePorts ?? NONE;
  if (before === after) return changed;
  const candidates = candidateChanges(before, after);
  if (candidates !== undefined) {
    for (const key of candidates) if (differs(before.get(key), after.get(key))) changed.add(key);
    return changed;
  }
  for (const [key, port] of after) if (differs(before.get(key), port)) changed.add(key);
  for (const key of before.keys()) if (!after.has(key)) changed.add(key);
  return changed;
}

function differs(old: ServicePort | undefined, port: ServicePort | undefined): boolean {
  if (old === port) return false;
  return old === undefined || port === undefined || !sameServicePort(old, port);
}

const NO_LISTS = { clusterEndpoints: undefined, localEndpoints: undefined, otherServingEndpoints: undefined };

/**
 * Whether two service ports are equal in every field, their endpoint lists compared by content:
 * an array and a ChunkedList, or two lists chunked apart, may hold the same endpoints, and lists
 * that share chunks are compared past them.
 */
export function sameServicePort(a: ServicePort, b: ServicePort): boolean {
  return (
    sameEndpoints(a.clusterEndpoints, b.clusterEndpoints) &&
    sameEndpoints(a.localEndpoints, b.localEndpoints) &&
    sameEndpoints(a.otherServingEndpoints, b.otherServingEndpoints) &&
    isDeepStrictEqual({ ...a, ...NO_LISTS }, { ...b, ...NO_LISTS })
  );
}

function sameEndpoints(a: EndpointList | undefined, b: EndpointList | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  let same = true;
  walkPaired(a, b, (x, y) => {
    if (x === y || isDeepStrictEqual(x, y)) return 'both';
    same = false;
    return 'stop';
  });
  return same;
}
