// The service ports an incremental sync must touch between two states of one family.
import { isDeepStrictEqual } from 'node:util';
import type { ProxyState, ServicePortKey } from './proxy-state.ts';

/**
 * Keys of service ports added, removed, or different in any field (endpoints included). Node
 * settings are not compared: a change there calls for a full sync, which the caller decides.
 * Identity is checked first: states from the ModelCache share unchanged ports (and whole maps),
 * so comparing them costs a lookup per port, not a deep comparison.
 */
export function changedServicePorts(
  prev: ProxyState | undefined,
  next: ProxyState | undefined,
): ReadonlySet<ServicePortKey> {
  const changed = new Set<ServicePortKey>();
  if (prev?.servicePorts === next?.servicePorts) return changed;
  const before = prev?.servicePorts ?? new Map();
  const after = next?.servicePorts ?? new Map();
  for (const [key, port] of after) {
    const old = before.get(key);
    if (old !== port && !isDeepStrictEqual(old, port)) changed.add(key);
  }
  for (const key of before.keys()) if (!after.has(key)) changed.add(key);
  return changed;
}
