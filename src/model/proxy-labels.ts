// kube-proxy's informers select Services and EndpointSlices with label selectors; objects those
// selectors exclude are not ours to proxy. With a proxy name (--service-proxy-name) the selection
// turns around: only what is labelled for that name is ours, so kproxy and kube-proxy can run side
// by side, each serving the Services the other leaves alone.
//
// A Service moves between them by its label, but each proxy sees the label on its own: between
// one removing its rules and the other adding them, new connections would meet neither. So a
// Service labelled kproxy/handover=NAME is served by kproxy too while kube-proxy still serves it
// (kube-proxy ignores the label): both DNAT to the same endpoints, and whichever hook comes first
// wins. An operator adds the handover label, waits for kproxy's sync, moves the proxy name, and
// removes the handover label (README, "One Service at a time").
//
// With a proxy name, a slice is ours when its Service is: the EndpointSlice controller copies a
// Service's labels to its slices only later, and a Service served before its slices are would
// reject its connections as having no endpoints.
import {
  HANDOVER_LABEL,
  HEADLESS_LABEL,
  type ObjectMeta,
  SERVICE_PROXY_NAME_LABEL,
} from '../kube/objects.ts';

/**
 * Labelled as headless (kube-proxy's selector asks the same of Services as of slices), or not for
 * us: without a proxy name, labelled for any proxy (kube-proxy never sees it); with one, labelled
 * with that name neither as its proxy nor for a handover.
 */
export function serviceExcluded(metadata: Pick<ObjectMeta, 'labels'>, proxyName?: string): boolean {
  const labels = metadata.labels ?? {};
  if (HEADLESS_LABEL in labels) return true;
  return proxyName === undefined
    ? SERVICE_PROXY_NAME_LABEL in labels
    : labels[SERVICE_PROXY_NAME_LABEL] !== proxyName && labels[HANDOVER_LABEL] !== proxyName;
}

/**
 * Labelled as headless, or, without a proxy name, labelled for any proxy; with one, a slice
 * follows its Service (serviceExcluded), whatever labels it has been given so far.
 */
export function sliceExcluded(metadata: ObjectMeta, proxyName?: string): boolean {
  const labels = metadata.labels ?? {};
  if (HEADLESS_LABEL in labels) return true;
  return proxyName === undefined && SERVICE_PROXY_NAME_LABEL in labels;
}

/** Kubernetes' label value syntax (apimachinery IsValidLabelValue), non-empty: a proxy name must match it. */
const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** Why `value` cannot be a proxy name, or undefined when it can. */
export function proxyNameProblem(value: string): string | undefined {
  return LABEL_VALUE.test(value)
    ? undefined
    : 'not a label value (1-63 letters, digits, "-", "_" or ".", a letter or digit at each end)';
}
