// The cluster's service CIDRs: where cluster IPs are allocated from. kube-proxy (nftables) takes
// them from every ServiceCIDR object (networking.k8s.io/v1, GA 1.33) and drops traffic to an
// address in them that no Service holds. kproxy does the same, and falls back to the
// --service-cluster-ip-range option when the cluster has no ServiceCIDR object (an API server
// before 1.33, or one that does not serve the resource): kube-apiserver itself makes its
// default ServiceCIDR from that flag, so the two agree wherever both exist.
import { compareText } from '../../contract/base/compare-text.ts';
import { canonicalCIDR } from '../../contract/base/ip-address.ts';
import type { Problem } from '../../contract/base/problem.ts';
import type { ServiceCIDR } from '../kube/objects.ts';

/** Problems with options are reported against this name (as node-settings.ts does). */
const OPTIONS = 'kproxy options';

/**
 * Every CIDR of the objects (decoded: canonical), or of `fallback` when there is no object;
 * unique, sorted, both families.
 */
export function serviceCIDRsOf(
  objects: Iterable<ServiceCIDR>,
  fallback: readonly string[],
  problems: Problem[],
): string[] {
  const cidrs = new Set<string>();
  let anyObject = false;
  for (const object of objects) {
    anyObject = true;
    for (const cidr of object.spec.cidrs) cidrs.add(cidr);
  }
  if (!anyObject) {
    fallback.forEach((text, i) => {
      const cidr = canonicalCIDR(text.trim());
      if (cidr === undefined)
        problems.push({ object: OPTIONS, reason: `serviceCIDRs[${i}]: "${text}" is not a CIDR` });
      else cidrs.add(cidr);
    });
  }
  return [...cidrs].sort(compareText);
}
