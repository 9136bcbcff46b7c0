// When the change an EndpointSlice carries was triggered (its last-change-trigger-time
// annotation), read here so that src/sync measures network programming latency from a number and
// never sees a Kubernetes object.
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { type EndpointSlice, LAST_CHANGE_TRIGGER_TIME_ANNOTATION } from './objects.ts';

/** The slice's last-change-trigger-time in ms since the epoch, when present and valid. */
export function lastChangeTriggerTime(slice: EndpointSlice): number | undefined {
  const text = slice.metadata.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION];
  if (text === undefined) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * What a slice's change means to the latency metric: when it was triggered and the family whose
 * rules program it (its addressType). Undefined without a valid trigger time, and for FQDN slices,
 * which program nothing.
 */
export function sliceChangeTrigger(
  slice: EndpointSlice,
): { readonly triggeredAt: number; readonly family: IPFamily } | undefined {
  const triggeredAt = lastChangeTriggerTime(slice);
  const family = slice.addressType;
  if (triggeredAt === undefined || (family !== 'IPv4' && family !== 'IPv6')) return undefined;
  return { triggeredAt, family };
}
