// The service ports an incremental sync must touch between two states of one family.
import { isDeepStrictEqual } from 'node:util';
import { candidateChanges } from './layered-port-map.ts';
import type { ProxyState, ServicePort, ServicePortKey } from './proxy-state.ts';

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
  return old !== port && !isDeepStrictEqual(old, port);
}
