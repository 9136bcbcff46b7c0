// Decoded objects sorted by kind, in input order. Duplicates are left in: the model reports them.
import type { EndpointSlice, KubeObject, Node, Service, ServiceCIDR } from '../kube/objects.ts';

export interface ClusterObjects {
  readonly services: readonly Service[];
  readonly endpointSlices: readonly EndpointSlice[];
  readonly nodes: readonly Node[];
  readonly serviceCIDRs: readonly ServiceCIDR[];
}

export function groupObjects(objects: readonly KubeObject[]): ClusterObjects {
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  const nodes: Node[] = [];
  const serviceCIDRs: ServiceCIDR[] = [];
  for (const object of objects) {
    if (object.kind === 'Service') services.push(object);
    else if (object.kind === 'EndpointSlice') endpointSlices.push(object);
    else if (object.kind === 'Node') nodes.push(object);
    else serviceCIDRs.push(object);
  }
  return { services, endpointSlices, nodes, serviceCIDRs };
}
