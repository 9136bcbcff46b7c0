// kube-proxy's informers select Services and EndpointSlices with label selectors; objects those
// selectors exclude are not ours to proxy. With a proxy name (--service-proxy-name) the selection
// turns around: only what is labelled for that name is ours, so kproxy and kube-proxy can run side
// by side, each serving the Services the other leaves alone.
import { HEADLESS_LABEL, type ObjectMeta, SERVICE_PROXY_NAME_LABEL } from '../kube/objects.ts';

/**
 * Labelled as headless, or not for us: without a proxy name, labelled for any proxy (kube-proxy
 * never sees it); with one, not labelled with exactly that name.
 */
export function excludedByLabels(metadata: ObjectMeta, proxyName?: string): boolean {
  const labels = metadata.labels ?? {};
  if (HEADLESS_LABEL in labels) return true;
  return proxyName === undefined
    ? SERVICE_PROXY_NAME_LABEL in labels
    : labels[SERVICE_PROXY_NAME_LABEL] !== proxyName;
}

/** Kubernetes' label value syntax (apimachinery IsValidLabelValue), non-empty: a proxy name must match it. */
const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** Why `value` cannot be a proxy name, or undefined when it can. */
export function proxyNameProblem(value: string): string | undefined {
  return LABEL_VALUE.test(value)
    ? undefined
    : 'not a label value (1-63 letters, digits, "-", "_" or ".", a letter or digit at each end)';
}
