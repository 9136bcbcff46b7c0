// What kube-apiserver serves, by default, in each Kubernetes minor a user may run, for the resources
// the stand-in serves: which ServiceCIDR version is on, whether watch-list (sendInitialEvents) is
// served, and which Service and EndpointSlice fields a write keeps. Every fact comes from upstream's
// own record of the feature gate behind it (kubernetes/website, the files named below, which give
// each gate's stage and default per release); the field pruning it implies is in version-fields.ts.
//
// Feature gates, kubernetes/website content/en/docs/reference/command-line-tools-reference/feature-gates/:
// - MultiCIDRServiceAllocator.md (commit 09a121e5): alpha, off 1.27-1.30 (networking.k8s.io/v1alpha1
//   servicecidrs, its API version off by default); beta, off 1.31-1.32 (v1beta1, off by default, as
//   every beta API since 1.24); GA, on 1.33 (networking.k8s.io/v1), locked 1.34+.
// - WatchList.md (0637786b): alpha, off 1.27-1.31; beta, ON 1.32; beta, OFF 1.33; beta, on 1.34+.
// - ServiceTrafficDistribution.md (584eca24): the field spec.trafficDistribution is new in 1.30
//   (alpha, off: the server drops it); beta, on 1.31-1.32; GA 1.33. PreferClose is its one value.
// - PreferSameTrafficDistribution.md (02e08b9e): the values PreferSameZone and PreferSameNode and the
//   EndpointSlice field endpoints[].hints.forNodes: alpha, off 1.33; beta, on 1.34; GA 1.35+.
// - LoadBalancerIPMode.md (1c80df79): status.loadBalancer.ingress[].ipMode: alpha, off 1.29; beta,
//   on 1.30-1.31; GA 1.32+.
// Unchanged over 1.29-1.38, so not per profile: watch bookmarks (WatchBookmark GA 1.17),
// resourceVersionMatch (GA 1.19), chunked lists with continue tokens (APIListChunking beta, on,
// since 1.9), networking.k8s.io/v1 itself (1.19) and discovery.k8s.io/v1 EndpointSlices (1.21).
// 1.38: as far as its sources are out, none of these change from 1.37.

/** The minors a user may run: every release still in some vendor's support, and the newest. */
export const MINORS = [
  '1.29',
  '1.30',
  '1.31',
  '1.32',
  '1.33',
  '1.34',
  '1.35',
  '1.36',
  '1.37',
  '1.38',
] as const;
export type Minor = (typeof MINORS)[number];

/** The newest released minor: the stand-in's default. */
export const NEWEST_MINOR: Minor = '1.37';

/** How networking.k8s.io serves ServiceCIDRs by default; kproxy reads v1 only. */
export type ServiceCIDRServing = 'v1' | 'v1beta1-off' | 'v1alpha1-off';

/** What a write keeps of a field that the minor does not know, or knows behind a gate that is off. */
export type FieldServing = 'kept' | 'dropped';

export interface ApiProfile {
  readonly minor: Minor;
  readonly serviceCIDRs: ServiceCIDRServing;
  /** Whether a watch with sendInitialEvents=true is served (else refused with 422). */
  readonly watchList: boolean;
  /** spec.trafficDistribution: dropped, or kept with these values accepted (others: 422). */
  readonly trafficDistribution: FieldServing;
  readonly trafficDistributionValues: readonly string[];
  /** status.loadBalancer.ingress[].ipMode. */
  readonly loadBalancerIPMode: FieldServing;
  /** EndpointSlice endpoints[].hints.forNodes. */
  readonly hintsForNodes: FieldServing;
}

const PREFER_CLOSE = ['PreferClose'] as const;
const PREFER_SAME = ['PreferClose', 'PreferSameZone', 'PreferSameNode'] as const;

function profile(minor: Minor): ApiProfile {
  const n = Number(minor.split('.')[1]);
  return {
    minor,
    serviceCIDRs: n >= 33 ? 'v1' : n >= 31 ? 'v1beta1-off' : 'v1alpha1-off',
    watchList: n === 32 || n >= 34,
    trafficDistribution: n >= 31 ? 'kept' : 'dropped',
    trafficDistributionValues: n >= 34 ? PREFER_SAME : PREFER_CLOSE,
    loadBalancerIPMode: n >= 30 ? 'kept' : 'dropped',
    hintsForNodes: n >= 34 ? 'kept' : 'dropped',
  };
}

export const PROFILES: Readonly<Record<Minor, ApiProfile>> = Object.fromEntries(
  MINORS.map((minor) => [minor, profile(minor)]),
) as Record<Minor, ApiProfile>;

export function isMinor(value: string): value is Minor {
  return (MINORS as readonly string[]).includes(value);
}

/** What `kubectl version` shows for a server of this minor. */
export function serverVersion(minor: Minor): Record<string, string> {
  const [major, minorNumber] = minor.split('.');
  return {
    major: major!,
    minor: minorNumber!,
    gitVersion: `v${minor}.0-kproxy-stand-in`,
    platform: 'linux/amd64',
  };
}
