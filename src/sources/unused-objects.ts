// What kproxy does not use in the files a user feeds render, said once per file and kind: a
// `kubectl cluster-info dump` holds hundreds of Pods and Events, which deserve one line, not one
// each. Kinds kproxy never reads (Pods, ConfigMaps, legacy Endpoints beside EndpointSlices) are
// notes: the rest of the input is complete without them, so --strict does not fail on them; so are
// Services in an input without any EndpointSlice (a cluster-info dump has none), which render
// without endpoints. What leaves Services without their rules is a warning: an object kproxy reads
// in a version it does not (discovery.k8s.io/v1beta1 EndpointSlices), legacy Endpoints with no
// EndpointSlice anywhere in the input, and a Service without a cluster IP (a manifest, not what
// the cluster serves).
import { objectRef } from '../../contract/base/problem.ts';
import type { KubeObject, Service } from '../kube/objects.ts';

/** An object skipped, or a group of them: `object` names it ("14 Pod objects (Pod kube-system/coredns-x, ...)"). */
export interface SourceWarning {
  readonly file: string;
  readonly object: string;
  readonly reason: string;
}

/** An object decodeObject ignored: its kind as written, its name, and decodeObject's reason. */
export interface UnusedObject {
  readonly kind: string;
  readonly object: string;
  readonly reason: string;
}

/** What one input file held: the objects kproxy reads, and those decodeObject ignored. */
export interface FileObjects {
  readonly file: string;
  readonly objects: readonly KubeObject[];
  readonly unused: readonly UnusedObject[];
}

export interface UnusedReport {
  /** Each says what happened to its objects: "not used: ...", "render without endpoints: ...". */
  readonly notes: readonly SourceWarning[];
  /** Each says why its objects were skipped. */
  readonly warnings: readonly SourceWarning[];
}

/** The kinds kproxy reads, with the resource kubectl lists them by. */
const READ_KINDS: Readonly<Record<string, string>> = {
  Service: 'services',
  EndpointSlice: 'endpointslices',
  Node: 'nodes',
  ServiceCIDR: 'servicecidrs',
};

const FEED_SLICES = 'feed `kubectl get endpointslices -A -o yaml` too';

/** One note or warning per file, kind and reason, in input order. */
export function reportUnused(files: readonly FileObjects[]): UnusedReport {
  const notes: SourceWarning[] = [];
  const warnings: SourceWarning[] = [];
  const slicesRead = files.some(({ objects }) => objects.some((object) => object.kind === 'EndpointSlice'));
  const endpointsGiven = files.some(({ unused }) => unused.some((object) => object.kind === 'Endpoints'));
  for (const { file, objects, unused } of files) {
    for (const group of Map.groupBy(unused, (object) => `${object.kind}\n${object.reason}`).values()) {
      const first = group[0]!;
      const object = namedGroup(
        group.map((each) => each.object),
        `${first.kind} objects`,
        1,
      );
      const { reason, warn } = explain(first, slicesRead);
      if (warn) warnings.push({ file, object, reason });
      else notes.push({ file, object, reason: `not used: ${reason}` });
    }
    const services = objects.filter((object): object is Service => object.kind === 'Service');
    const manifests = services.filter((service) => !hasClusterIP(service));
    if (manifests.length > 0) warnings.push(withoutClusterIP(file, manifests));
    // `kubectl cluster-info dump` holds Services and no EndpointSlice; legacy Endpoints say it above.
    const proxied = services.filter((service) => hasClusterIP(service) && isProxied(service));
    if (!slicesRead && !endpointsGiven && proxied.length > 0) {
      const object = namedGroup(proxied.map(serviceRef), 'Services', 1);
      const reason = `render without endpoints: the input has no EndpointSlice; ${FEED_SLICES}`;
      notes.push({ file, object, reason });
    }
  }
  return { notes, warnings };
}

function explain(
  unused: UnusedObject,
  slicesRead: boolean,
): { readonly reason: string; readonly warn: boolean } {
  const resource = READ_KINDS[unused.kind];
  if (unused.kind === 'Endpoints') {
    const why = 'kproxy reads endpoints from EndpointSlices (discovery.k8s.io/v1), as kube-proxy does';
    if (slicesRead) return { reason: why, warn: false };
    const loss = 'the input has no EndpointSlice, so every Service renders without endpoints';
    return { reason: `${why}; ${loss}: ${FEED_SLICES}`, warn: true };
  }
  if (unused.kind === 'EndpointSlice' && unused.reason.startsWith('FQDN')) {
    return { reason: `${unused.reason} (nor by kube-proxy)`, warn: false };
  }
  if (unused.kind === 'ServiceCIDR') {
    const feed = 'give the Service CIDRs with --service-cluster-ip-range instead';
    return { reason: `${unused.reason}: ${feed}`, warn: true };
  }
  if (resource !== undefined) {
    const feed = `feed \`kubectl get ${resource} -A -o yaml\` from the cluster (what it serves today)`;
    return { reason: `${unused.reason}: ${feed}`, warn: true };
  }
  return { reason: 'kproxy reads only Services, EndpointSlices, Nodes and ServiceCIDRs', warn: false };
}

/**
 * Services without a cluster IP, which the API server gives every Service it stores (an address,
 * or None for a headless one): a manifest's, with no rules to render.
 */
function withoutClusterIP(file: string, services: readonly Service[]): SourceWarning {
  const object = namedGroup(services.map(serviceRef), 'Services', 3);
  const why =
    'no spec.clusterIP: a manifest, not what the cluster serves (the API server gives every Service one), so no rules';
  return { file, object, reason: `${why}; feed \`kubectl get services,endpointslices -A -o yaml\` output` };
}

function hasClusterIP(service: Service): boolean {
  const { type, clusterIP, clusterIPs } = service.spec;
  return type === 'ExternalName' || Boolean(clusterIP) || (clusterIPs?.length ?? 0) > 0;
}

/** Not headless nor ExternalName: kproxy programs its cluster IP. */
function isProxied(service: Service): boolean {
  const { type, clusterIP, clusterIPs } = service.spec;
  return type !== 'ExternalName' && (clusterIPs?.[0] ?? clusterIP) !== 'None';
}

function serviceRef(service: Service): string {
  return objectRef('Service', service.metadata.namespace, service.metadata.name);
}

/** "X", or "14 <what> (X, ...)" naming the first `shown`. */
function namedGroup(names: readonly string[], what: string, shown: number): string {
  if (names.length === 1) return names[0]!;
  const more = names.length > shown ? ', ...' : '';
  return `${names.length} ${what} (${names.slice(0, shown).join(', ')}${more})`;
}
