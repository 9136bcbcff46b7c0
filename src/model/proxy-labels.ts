// kube-proxy's informers select Services and EndpointSlices with label selectors; objects those
// selectors exclude are not ours to proxy.
import { HEADLESS_LABEL, type ObjectMeta, SERVICE_PROXY_NAME_LABEL } from '../kube/objects.ts';

/** Labelled for another proxy (any value) or as headless: kube-proxy never sees it. */
export function excludedByLabels(metadata: ObjectMeta): boolean {
  const labels = metadata.labels;
  return labels !== undefined && (SERVICE_PROXY_NAME_LABEL in labels || HEADLESS_LABEL in labels);
}
