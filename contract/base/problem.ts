// A user error found in cluster objects or options: reported to a person, never thrown.

export interface Problem {
  /** What the problem is about, e.g. "Service default/web", "EndpointSlice default/web-abc12", "Node node-1". */
  readonly object: string;
  /** What is wrong, naming the field, e.g. 'spec.ports[1].port: 70000 is not a valid port (1-65535)'. */
  readonly reason: string;
}

/** "Kind namespace/name" for namespaced objects, "Kind name" for cluster-scoped ones. */
export function objectRef(kind: string, namespace: string | undefined, name: string): string {
  return namespace === undefined ? `${kind} ${name}` : `${kind} ${namespace}/${name}`;
}
