// Server-side printing: the meta.k8s.io/v1 Table kube-apiserver returns when a client (kubectl get)
// asks for `application/json;as=Table;v=v1;g=meta.k8s.io`, with the columns and cell formats of
// kube-apiserver's printers (pkg/printers/internalversion) for Services, EndpointSlices, Nodes and
// ServiceCIDRs.

import { compareText } from '../../contract/base/compare-text.ts';
import type { ResourceType } from '../../src/kube/resources.ts';
import type { StoredObject } from './state.ts';

interface Column {
  readonly name: string;
  readonly type: 'string' | 'integer';
  readonly format?: 'name';
  readonly description: string;
  /** 0: always shown; 1: only with -o wide. */
  readonly priority?: 1;
}

/** What each row carries as its object: kube-apiserver's `includeObject` query parameter. */
export type IncludeObject = 'None' | 'Object' | 'PartialObjectMetadata';

const NAME: Column = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description: 'Name must be unique within a namespace.',
};
const AGE: Column = { name: 'Age', type: 'string', description: 'Time since the object was created.' };

type Printer = { readonly columns: readonly Column[]; readonly cells: (o: Any, now: number) => unknown[] };
// Stored objects are JSON of the resource's shape; the printers read them loosely, as optional fields.
// biome-ignore lint/suspicious/noExplicitAny: JSON read by path, every field optional
type Any = any;

const PRINTERS: Record<ResourceType['plural'], Printer> = {
  servicecidrs: {
    columns: [NAME, { name: 'CIDRs', type: 'string', description: 'The CIDRs of the ServiceCIDR.' }, AGE],
    cells: (o, now) => [o.metadata.name, joinOr(o.spec?.cidrs ?? [], '<none>'), age(o, now)],
  },
  services: {
    columns: [
      NAME,
      { name: 'Type', type: 'string', description: 'How the Service is exposed.' },
      { name: 'Cluster-IP', type: 'string', description: 'The IP address of the service.' },
      { name: 'External-IP', type: 'string', description: 'External IP addresses of the service.' },
      { name: 'Port(s)', type: 'string', description: 'The ports the service exposes.' },
      AGE,
      {
        name: 'Selector',
        type: 'string',
        priority: 1,
        description: 'Route traffic to pods with these labels.',
      },
    ],
    cells: (o, now) => [
      o.metadata.name,
      o.spec?.type ?? 'ClusterIP',
      o.spec?.clusterIP || '<none>',
      serviceExternalIP(o),
      joinOr(
        (o.spec?.ports ?? []).map(
          (p: Any) => `${p.port}${p.nodePort ? `:${p.nodePort}` : ''}/${p.protocol ?? 'TCP'}`,
        ),
        '<none>',
      ),
      age(o, now),
      selectorText(o.spec?.selector),
    ],
  },
  endpointslices: {
    columns: [
      NAME,
      {
        name: 'AddressType',
        type: 'string',
        description: 'The type of address carried by this EndpointSlice.',
      },
      { name: 'Ports', type: 'string', description: 'Network ports exposed by the endpoints in this slice.' },
      { name: 'Endpoints', type: 'string', description: 'Addresses of the endpoints in this slice.' },
      AGE,
    ],
    cells: (o, now) => [
      o.metadata.name,
      o.addressType ?? '',
      firstThree(
        (o.ports ?? []).map((p: Any) => (p.port === undefined ? '<unset>' : String(p.port))),
        '<unset>',
      ),
      firstThree(
        (o.endpoints ?? []).flatMap((e: Any) => e.addresses ?? []),
        '<unset>',
      ),
      age(o, now),
    ],
  },
  nodes: {
    columns: [
      NAME,
      { name: 'Status', type: 'string', description: 'The status of the node.' },
      { name: 'Roles', type: 'string', description: 'The roles of the node.' },
      AGE,
      { name: 'Version', type: 'string', description: 'Kubelet version reported by the node.' },
      { name: 'Internal-IP', type: 'string', priority: 1, description: 'Internal IP of the node.' },
      { name: 'External-IP', type: 'string', priority: 1, description: 'External IP of the node.' },
      { name: 'OS-Image', type: 'string', priority: 1, description: 'OS image reported by the node.' },
      {
        name: 'Kernel-Version',
        type: 'string',
        priority: 1,
        description: 'Kernel version reported by the node.',
      },
      {
        name: 'Container-Runtime',
        type: 'string',
        priority: 1,
        description: 'Container runtime reported by the node.',
      },
    ],
    cells: (o, now) => {
      const info = o.status?.nodeInfo ?? {};
      return [
        o.metadata.name,
        nodeStatus(o),
        joinOr(
          Object.keys(o.metadata.labels ?? {})
            .filter((k) => k.startsWith('node-role.kubernetes.io/'))
            .map((k) => k.slice('node-role.kubernetes.io/'.length))
            .filter((r) => r !== '')
            .sort(),
          '<none>',
        ),
        age(o, now),
        info.kubeletVersion ?? '',
        nodeAddress(o, 'InternalIP'),
        nodeAddress(o, 'ExternalIP'),
        info.osImage || '<unknown>',
        info.kernelVersion || '<unknown>',
        info.containerRuntimeVersion || '<unknown>',
      ];
    },
  },
};

/** The Table for these objects; listMetadata is the list's (resourceVersion, continue). */
export function toTable(
  resource: ResourceType,
  objects: readonly StoredObject[],
  listMetadata: Record<string, unknown>,
  include: IncludeObject,
  now = Date.now(),
): unknown {
  const printer = PRINTERS[resource.plural];
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: listMetadata,
    columnDefinitions: printer.columns.map((c) => ({ priority: 0, format: '', ...c })),
    rows: objects.map((o) => ({
      cells: printer.cells(o, now),
      ...(include === 'None' ? {} : { object: rowObject(resource, o, include) }),
    })),
  };
}

/** The includeObject parameter (default PartialObjectMetadata), or undefined for a value kube-apiserver refuses. */
export function parseIncludeObject(value: string | null): IncludeObject | undefined {
  if (value === null || value === '') return 'PartialObjectMetadata';
  return value === 'None' || value === 'Object' || value === 'PartialObjectMetadata' ? value : undefined;
}

/** Whether an Accept header asks for a meta.k8s.io/v1 Table (kubectl lists it first, JSON after). */
export function wantsTable(accept: string | undefined): boolean {
  return (accept ?? '').split(',').some((type) => {
    const params = new Map(
      type
        .split(';')
        .slice(1)
        .map((p) => p.trim().split('=') as [string, string]),
    );
    return params.get('as') === 'Table' && params.get('g') === 'meta.k8s.io' && params.get('v') === 'v1';
  });
}

function rowObject(resource: ResourceType, o: StoredObject, include: IncludeObject): unknown {
  if (include === 'Object') return { kind: resource.kind, apiVersion: resource.apiVersion, ...o };
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
}

function serviceExternalIP(o: Any): string {
  const external: string[] = o.spec?.externalIPs ?? [];
  switch (o.spec?.type) {
    case 'LoadBalancer': {
      const ingress = (o.status?.loadBalancer?.ingress ?? []).map((i: Any) => i.ip || i.hostname);
      return joinOr([...ingress, ...external], '<pending>');
    }
    case 'ExternalName':
      return o.spec.externalName ?? '<none>';
    default:
      return joinOr(external, '<none>');
  }
}

function nodeStatus(o: Any): string {
  const ready = (o.status?.conditions ?? []).find((c: Any) => c.type === 'Ready');
  const status = [ready === undefined ? 'Unknown' : ready.status === 'True' ? 'Ready' : 'NotReady'];
  if (o.spec?.unschedulable) status.push('SchedulingDisabled');
  return status.join(',');
}

function nodeAddress(o: Any, type: string): string {
  return (o.status?.addresses ?? []).find((a: Any) => a.type === type)?.address ?? '<none>';
}

function selectorText(selector: Record<string, string> | undefined): string {
  return joinOr(
    Object.entries(selector ?? {})
      .sort(([a], [b]) => compareText(a, b))
      .map(([k, v]) => `${k}=${v}`),
    '<none>',
  );
}

function joinOr(items: readonly string[], empty: string): string {
  return items.length === 0 ? empty : items.join(',');
}

/** The first three, then "+ N more...", as the EndpointSlice printer shows ports and addresses. */
function firstThree(items: readonly string[], empty: string): string {
  if (items.length === 0) return empty;
  const more = items.length > 3 ? ` + ${items.length - 3} more...` : '';
  return items.slice(0, 3).join(',') + more;
}

function age(o: Any, now: number): string {
  const created = Date.parse(o.metadata.creationTimestamp ?? '');
  return Number.isNaN(created) ? '<unknown>' : humanDuration((now - created) / 1000);
}

/** apimachinery's duration.HumanDuration, which the printers use for the Age column. */
export function humanDuration(seconds: number): string {
  const s = Math.trunc(seconds);
  if (s < -1) return '<invalid>';
  if (s < 0) return '0s';
  if (s < 120) return `${s}s`;
  const minutes = Math.trunc(s / 60);
  if (minutes < 10) return s % 60 === 0 ? `${minutes}m` : `${minutes}m${s % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  const days = Math.trunc(hours / 24);
  if (hours < 24 * 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.trunc(days / 365);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
  return `${years}y`;
}
