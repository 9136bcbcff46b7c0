// Decoded objects sorted by kind, in input order. Duplicates are left in: the model reports them.
import type { EndpointSlice, KubeObject, Node, Service } from '../kube/objects.ts';

export interface ClusterObjects {
  readonly services: readonly Service[];
  readonly endpointSlices: readonly EndpointSlice[];
  readonly nodes: readonly Node[];
}

export function groupObjects(objects: readonly KubeObject[]): ClusterObjects {
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  const nodes: Node[] = [];
  for (const object of objects) {
    if (object.kind === 'Service') services.push(object);
    else if (object.kind === 'EndpointSlice') endpointSlices.push(object);
    else nodes.push(object);
  }
  return { services, endpointSlices, nodes };
}
