// The API resources kproxy reads, and where the API server serves them. Shared by the client,
// the informers and the stand-in API server so that both ends agree on paths and kinds.
import { flatText } from '../../contract/base/flat-text.ts';

export interface ResourceType {
  /** Plural resource name as it appears in the URL path and in metric labels. */
  readonly plural: 'services' | 'endpointslices' | 'nodes' | 'servicecidrs';
  readonly apiVersion: string;
  readonly kind: 'Service' | 'EndpointSlice' | 'Node' | 'ServiceCIDR';
  readonly listKind: string;
  readonly namespaced: boolean;
  /**
   * Set for a resource kproxy runs without when the server does not serve it (404: ServiceCIDRs
   * before 1.33) or does not let kproxy read it (403: an RBAC role written before it existed);
   * `without`: what kproxy does then, for the log line that says so.
   */
  readonly optional?: { readonly without: string };
}

export const SERVICES: ResourceType = {
  plural: 'services',
  apiVersion: 'v1',
  kind: 'Service',
  listKind: 'ServiceList',
  namespaced: true,
};

export const ENDPOINT_SLICES: ResourceType = {
  plural: 'endpointslices',
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  listKind: 'EndpointSliceList',
  namespaced: true,
};

export const NODES: ResourceType = {
  plural: 'nodes',
  apiVersion: 'v1',
  kind: 'Node',
  listKind: 'NodeList',
  namespaced: false,
};

export const SERVICE_CIDRS: ResourceType = {
  plural: 'servicecidrs',
  apiVersion: 'networking.k8s.io/v1',
  kind: 'ServiceCIDR',
  listKind: 'ServiceCIDRList',
  namespaced: false,
  optional: {
    without:
      'the service CIDRs come from --service-cluster-ip-range (serviceClusterIPRange in the config) alone',
  },
};

export const RESOURCE_TYPES: readonly ResourceType[] = [SERVICES, ENDPOINT_SLICES, NODES, SERVICE_CIDRS];

/** `/api/v1` for the core group, `/apis/<group>/<version>` otherwise. */
export function groupVersionPath(resource: ResourceType): string {
  return resource.apiVersion.includes('/') ? `/apis/${resource.apiVersion}` : `/api/${resource.apiVersion}`;
}

/** The collection path across all namespaces (or of a cluster-scoped resource). */
export function collectionPath(resource: ResourceType): string {
  return `${groupVersionPath(resource)}/${resource.plural}`;
}

/** The path of one object, or of a namespace's collection when name is omitted. */
export function objectPath(resource: ResourceType, namespace: string | undefined, name?: string): string {
  const base =
    resource.namespaced && namespace !== undefined
      ? `${groupVersionPath(resource)}/namespaces/${encodeURIComponent(namespace)}/${resource.plural}`
      : collectionPath(resource);
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}

/** The store key of an object: `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(metadata: { readonly name: string; readonly namespace?: string }): string {
  return metadata.namespace ? flatText(metadata.namespace, '/', metadata.name) : metadata.name;
}
