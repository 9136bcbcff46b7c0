// The discovery documents kube-apiserver serves at /version, /api, /api/v1, /apis and
// /apis/<group>/<version>, for the resources the stand-in serves, so that kubectl (and any client-go
// program) can find them. The unaggregated form only: a client asking for aggregated discovery
// (apidiscovery.k8s.io/v2) also accepts application/json and falls back to these, as it does
// against a server older than 1.26. What exists follows the server's minor (profiles.ts): before
// 1.33 networking.k8s.io/v1 has no servicecidrs (its other resources, ingresses and network
// policies, are not the stand-in's to serve, so the group's list is empty there).

import { groupVersionPath, RESOURCE_TYPES, type ResourceType } from '../../src/kube/resources.ts';
import { type ApiProfile, serverVersion } from './profiles.ts';

/** The verbs the stand-in serves for every resource (no deletecollection, no subresources). */
const VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] as const;

/** Per resource, what kube-apiserver's discovery says beyond ResourceType. */
const EXTRA: Record<
  ResourceType['plural'],
  { singularName: string; shortNames?: readonly string[]; categories?: readonly string[] }
> = {
  services: { singularName: 'service', shortNames: ['svc'], categories: ['all'] },
  endpointslices: { singularName: 'endpointslice' },
  nodes: { singularName: 'node', shortNames: ['no'] },
  servicecidrs: { singularName: 'servicecidr' },
};

function groupVersions(): string[] {
  return [...new Set(RESOURCE_TYPES.map((r) => r.apiVersion))];
}

/** Whether a server of this profile serves the resource (at the version kproxy reads). */
export function servedBy(profile: ApiProfile, resource: ResourceType): boolean {
  return resource.plural !== 'servicecidrs' || profile.serviceCIDRs === 'v1';
}

/** The document at `pathname`, or undefined when it is not a discovery path. */
export function discoveryDocument(pathname: string, serverAddress: string, profile: ApiProfile): unknown {
  const path = pathname.replace(/\/$/, '');
  if (path === '/version') return serverVersion(profile.minor);
  if (path === '/api') {
    return {
      kind: 'APIVersions',
      versions: groupVersions().filter((gv) => !gv.includes('/')),
      serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
    };
  }
  if (path === '/apis') {
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: groupVersions()
        .filter((gv) => gv.includes('/'))
        .map((gv) => {
          const version = { groupVersion: gv, version: gv.split('/')[1] };
          return { name: gv.split('/')[0], versions: [version], preferredVersion: version };
        }),
    };
  }
  for (const gv of groupVersions()) {
    if (path !== groupVersionPath(RESOURCE_TYPES.find((r) => r.apiVersion === gv)!)) continue;
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: gv,
      resources: RESOURCE_TYPES.filter((r) => r.apiVersion === gv && servedBy(profile, r)).map((r) => ({
        name: r.plural,
        singularName: EXTRA[r.plural].singularName,
        namespaced: r.namespaced,
        kind: r.kind,
        verbs: VERBS,
        ...(EXTRA[r.plural].shortNames ? { shortNames: EXTRA[r.plural].shortNames } : {}),
        ...(EXTRA[r.plural].categories ? { categories: EXTRA[r.plural].categories } : {}),
      })),
    };
  }
  return undefined;
}
