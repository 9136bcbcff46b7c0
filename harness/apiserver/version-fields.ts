// What a write of a Service or EndpointSlice keeps on a server of a given minor (profiles.ts says
// which fields each minor knows). A field the minor's types lack is pruned by the decoder, with a
// warning (field validation "Warn", the server's default for a request without fieldValidation); a
// field it knows behind a feature gate that is off is dropped silently by the registry's
// dropDisabledFields; a trafficDistribution value it does not accept is refused (422 Invalid).

import type { ResourceType } from '../../src/kube/resources.ts';
import type { ApiProfile } from './profiles.ts';

type Json = Record<string, unknown>;

export type VersionedWrite =
  | { readonly ok: true; readonly object: Json; readonly unknownFields: readonly string[] }
  | { readonly ok: false; readonly field: string; readonly message: string };

/** The minor whose types first have each field (older ones prune it as unknown); ipMode is in all. */
const TRAFFIC_DISTRIBUTION_SINCE = 30;
const FOR_NODES_SINCE = 33;

export function versionedWrite(profile: ApiProfile, resource: ResourceType, input: Json): VersionedWrite {
  if (resource.plural === 'services') return serviceWrite(profile, input);
  if (resource.plural === 'endpointslices') return sliceWrite(profile, input);
  return { ok: true, object: input, unknownFields: [] };
}

function minorNumber(profile: ApiProfile): number {
  return Number(profile.minor.split('.')[1]);
}

function serviceWrite(profile: ApiProfile, input: Json): VersionedWrite {
  const unknownFields: string[] = [];
  const spec = input.spec as Json | undefined;
  let object = input;
  if (spec && 'trafficDistribution' in spec) {
    if (profile.trafficDistribution === 'dropped') {
      const { trafficDistribution: _dropped, ...rest } = spec;
      object = { ...object, spec: rest };
      if (minorNumber(profile) < TRAFFIC_DISTRIBUTION_SINCE) unknownFields.push('spec.trafficDistribution');
    } else if (!profile.trafficDistributionValues.includes(String(spec.trafficDistribution))) {
      const supported = profile.trafficDistributionValues.map((v) => `"${v}"`).join(', ');
      return {
        ok: false,
        field: 'spec.trafficDistribution',
        message: `spec.trafficDistribution: Unsupported value: "${String(spec.trafficDistribution)}": supported values: ${supported}`,
      };
    }
  }
  const status = object.status as { loadBalancer?: { ingress?: Json[] } } | undefined;
  const ingress = status?.loadBalancer?.ingress;
  if (profile.loadBalancerIPMode === 'dropped' && ingress?.some((i) => 'ipMode' in i)) {
    const kept = ingress.map(({ ipMode: _dropped, ...rest }) => rest);
    object = { ...object, status: { ...status, loadBalancer: { ...status!.loadBalancer, ingress: kept } } };
  }
  return { ok: true, object, unknownFields };
}

function sliceWrite(profile: ApiProfile, input: Json): VersionedWrite {
  const endpoints = input.endpoints as { hints?: Json }[] | undefined;
  if (profile.hintsForNodes === 'kept' || !endpoints?.some((e) => e.hints && 'forNodes' in e.hints))
    return { ok: true, object: input, unknownFields: [] };
  const unknown = minorNumber(profile) < FOR_NODES_SINCE;
  const unknownFields: string[] = [];
  const kept = endpoints.map((e, i) => {
    if (!e.hints || !('forNodes' in e.hints)) return e;
    if (unknown) unknownFields.push(`endpoints[${i}].hints.forNodes`);
    const { forNodes: _dropped, ...hints } = e.hints;
    return { ...e, hints };
  });
  return { ok: true, object: { ...input, endpoints: kept }, unknownFields };
}
