// Unknown JSON (an API response, a watch event, kubectl output) → a typed, valid, slim object.
//
// Only the fields in objects.ts are copied, so informer stores stay small. Defaults the API server
// would have filled are filled here (port protocol TCP, Service type ClusterIP, namespace
// "default"), and IPs and CIDRs are stored in canonical text, so the model can trust what it gets.
// Content errors come back as a Problem naming the object and the field; they never throw.
import { canonicalCIDR, canonicalIP, familyOf } from '../../contract/base/ip-address.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { objectRef, type Problem } from '../../contract/base/problem.ts';
import {
  type EndpointConditions,
  type EndpointHints,
  type EndpointSlice,
  type EndpointSliceEndpoint,
  type EndpointSlicePort,
  type KubeObject,
  LAST_CHANGE_TRIGGER_TIME_ANNOTATION,
  type LoadBalancerIngress,
  type Node,
  type ObjectMeta,
  READ_LABELS,
  type Service,
  type ServiceCIDR,
  type ServicePortSpec,
  type ServiceSpec,
} from './objects.ts';

export type DecodeResult =
  | { readonly kind: 'object'; readonly object: KubeObject }
  | { readonly kind: 'invalid'; readonly problem: Problem }
  /** A well-formed object kproxy does not use; `object` names it as `Problem.object` does. */
  | { readonly kind: 'ignored'; readonly object: string; readonly reason: string };

type JsonObject = Readonly<Record<string, unknown>>;
type Writable<T> = { -readonly [K in keyof T]: T[K] };

const API_VERSIONS: Readonly<Record<KubeObject['kind'], string>> = {
  Service: 'v1',
  EndpointSlice: 'discovery.k8s.io/v1',
  Node: 'v1',
  ServiceCIDR: 'networking.k8s.io/v1',
};
/**
 * The values an enum field may take, each mapped to itself: a decoded object holds the shared
 * constant instead of the parsed copy (each of 30,000 kept Services would hold its own "ClusterIP",
 * "SingleStack", "Cluster", "None").
 */
function allowed(...values: string[]): ReadonlyMap<string, string> {
  return new Map(values.map((value) => [value, value]));
}

const SERVICE_TYPES = allowed('ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName');
const PROTOCOLS = allowed('TCP', 'UDP', 'SCTP');
const TRAFFIC_POLICIES = allowed('Cluster', 'Local');
const SESSION_AFFINITIES = allowed('None', 'ClientIP');
const IP_MODES = allowed('VIP', 'Proxy');
const IP_FAMILIES = allowed('IPv4', 'IPv6');
/** Not read by kproxy, so not checked: only shared when it is one of these. */
const IP_FAMILY_POLICIES = allowed('SingleStack', 'PreferDualStack', 'RequireDualStack');
const NODE_IP_ADDRESS_TYPES = new Set(['InternalIP', 'ExternalIP']);
// RFC 1123 names, as the API server checks them for Services, EndpointSlices, Nodes, namespaces.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Thrown inside this module only; decodeObject turns it into an `invalid` result. */
class FieldError extends Error {}

function fail(path: string, reason: string): never {
  throw new FieldError(`${path}: ${reason}`);
}

/** A value as the user wrote it, for messages: strings quoted, long values cut. */
function show(value: unknown): string {
  const text = stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Deeply nested or cyclic (YAML aliases) input is described, not a RangeError or TypeError. */
function stringify(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch (error) {
    if (!(error instanceof RangeError || error instanceof TypeError)) throw error;
    return Array.isArray(value) ? '[...]' : '{...}';
  }
}

export function decodeObject(raw: unknown): DecodeResult {
  if (!isObject(raw)) return invalid('(unknown object)', `expected an object, got ${show(raw)}`);
  const kind = raw.kind;
  if (typeof kind !== 'string' || kind === '') {
    // Named by its metadata when it has one, so the user can find it among many.
    const reason =
      kind === undefined || kind === null || kind === '' ? 'missing' : `${show(kind)} is not a string`;
    return invalid(refOf('object', raw.metadata, hasNamespace(raw.metadata)), `kind: ${reason}`);
  }
  if (kind !== 'Service' && kind !== 'EndpointSlice' && kind !== 'Node' && kind !== 'ServiceCIDR') {
    const object = refOf(kind, raw.metadata, hasNamespace(raw.metadata));
    return { kind: 'ignored', object, reason: `kind ${kind} is not used by kproxy` };
  }
  const namespaced = kind !== 'Node' && kind !== 'ServiceCIDR';
  const ref = refOf(kind, raw.metadata, namespaced);
  const apiVersion = raw.apiVersion;
  if (apiVersion !== undefined && apiVersion !== API_VERSIONS[kind]) {
    return {
      kind: 'ignored',
      object: ref,
      reason: `${kind} ${show(apiVersion)} is not supported (want ${API_VERSIONS[kind]})`,
    };
  }
  try {
    const metadata = decodeMetadata(raw.metadata, namespaced, kind === 'Service');
    switch (kind) {
      case 'Service':
        return { kind: 'object', object: decodeService(raw, metadata) };
      case 'EndpointSlice':
        if (raw.addressType === 'FQDN')
          return { kind: 'ignored', object: ref, reason: 'FQDN slices are not proxied' };
        return { kind: 'object', object: decodeEndpointSlice(raw, metadata) };
      case 'Node':
        return { kind: 'object', object: decodeNode(raw, metadata) };
      case 'ServiceCIDR':
        return { kind: 'object', object: decodeServiceCIDR(raw, metadata) };
    }
  } catch (error) {
    if (error instanceof FieldError) return invalid(ref, error.message);
    throw error;
  }
}

function invalid(object: string, reason: string): DecodeResult {
  return { kind: 'invalid', problem: { object, reason } };
}

function refOf(kind: string, metadata: unknown, namespaced: boolean): string {
  const name =
    isObject(metadata) && typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : '';
  if (name === '') return `${kind} (unnamed)`;
  return objectRef(kind, namespaced ? namespaceOf(metadata) : undefined, name);
}

/** Whether an object of a kind kproxy does not know says it is namespaced (a Pod, not a Namespace). */
function hasNamespace(metadata: unknown): boolean {
  return isObject(metadata) && typeof metadata.namespace === 'string' && metadata.namespace !== '';
}

function namespaceOf(metadata: unknown): string {
  // kubectl fills in "default" for objects written without a namespace; so do we.
  return isObject(metadata) && typeof metadata.namespace === 'string' && metadata.namespace !== ''
    ? metadata.namespace
    : 'default';
}

// ---- metadata ----

/** `dated`: keep creationTimestamp (Services: the older one keeps a contested address). */
function decodeMetadata(raw: unknown, namespaced: boolean, dated: boolean): ObjectMeta {
  const meta = requiredObject(raw, 'metadata');
  const name = meta.name;
  if (typeof name !== 'string' || name === '') fail('metadata.name', 'missing');
  // Names end up in rule comments and chain hashes: only what the API server would accept.
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name))
    fail('metadata.name', `${show(name)} is not a lowercase DNS name (a-z, 0-9, '-', '.')`);
  let namespace: string | undefined;
  if (namespaced) {
    namespace = namespaceOf(meta);
    if (namespace.length > 63 || !DNS_LABEL.test(namespace))
      fail('metadata.namespace', `${show(namespace)} is not a lowercase DNS label (a-z, 0-9, '-')`);
  } else if (typeof meta.namespace === 'string' && meta.namespace !== '')
    fail('metadata.namespace', 'must be empty');
  const resourceVersion = optionalString(meta, 'resourceVersion', 'metadata');
  const creationTimestamp = dated ? optionalTimestamp(meta, 'creationTimestamp') : undefined;
  // The usual fields in one literal: V8 keeps a literal's properties in the object, and puts those
  // added later in an array of their own (~40 bytes more for each of 30,000 kept Services).
  const out: Writable<ObjectMeta> =
    namespace === undefined || resourceVersion === undefined
      ? { name }
      : creationTimestamp === undefined
        ? { name, namespace, resourceVersion }
        : { name, namespace, resourceVersion, creationTimestamp };
  if (out.resourceVersion === undefined) {
    setIfDefined(out, 'namespace', namespace);
    setIfDefined(out, 'resourceVersion', resourceVersion);
    setIfDefined(out, 'creationTimestamp', creationTimestamp);
  }
  setIfDefined(out, 'deletionTimestamp', optionalString(meta, 'deletionTimestamp', 'metadata'));
  const labels = optionalObject(meta.labels, 'metadata.labels');
  if (labels !== undefined) setIfDefined(out, 'labels', readLabels(stringMap(labels, 'metadata.labels')));
  // Only the annotation kproxy reads: others (last-applied-configuration...) can be large.
  const annotations = optionalObject(meta.annotations, 'metadata.annotations');
  const trigger = annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION];
  if (typeof trigger === 'string') out.annotations = { [LAST_CHANGE_TRIGGER_TIME_ANNOTATION]: trigger };
  return out;
}

/** The labels kproxy reads, or undefined when there are none. */
function readLabels(labels: Readonly<Record<string, string>>): Readonly<Record<string, string>> | undefined {
  const read = READ_LABELS.filter((key) => Object.hasOwn(labels, key));
  return read.length === 0 ? undefined : Object.fromEntries(read.map((key) => [key, labels[key]!]));
}

function stringMap(raw: JsonObject, path: string): Readonly<Record<string, string>> {
  for (const key in raw) {
    if (typeof raw[key] !== 'string') fail(`${path}[${show(key)}]`, `${show(raw[key])} is not a string`);
  }
  return raw as Readonly<Record<string, string>>;
}

// ---- Service ----

function decodeService(raw: JsonObject, metadata: ObjectMeta): Service {
  const spec = requiredObject(raw.spec, 'spec');
  const out: Writable<ServiceSpec> = {};
  const type = SERVICE_TYPES.get(optionalString(spec, 'type', 'spec') ?? 'ClusterIP');
  if (type === undefined)
    fail('spec.type', `${show(spec.type)} is not ClusterIP, NodePort, LoadBalancer or ExternalName`);
  out.type = type;
  decodeClusterIPs(spec, out);
  const ports = optionalArray(spec.ports, 'spec.ports');
  if (ports !== undefined) out.ports = decodeServicePorts(ports);
  const externalIPs = optionalArray(spec.externalIPs, 'spec.externalIPs');
  if (externalIPs !== undefined)
    out.externalIPs = externalIPs.map((ip, i) => ipAt(ip, `spec.externalIPs[${i}]`));
  setIfDefined(out, 'externalName', optionalString(spec, 'externalName', 'spec'));
  const loadBalancerIP = optionalString(spec, 'loadBalancerIP', 'spec');
  if (loadBalancerIP) out.loadBalancerIP = ipAt(loadBalancerIP, 'spec.loadBalancerIP');
  const sourceRanges = optionalArray(spec.loadBalancerSourceRanges, 'spec.loadBalancerSourceRanges');
  if (sourceRanges !== undefined) {
    // The API server lets whitespace padding through; kube-proxy trims it.
    out.loadBalancerSourceRanges = sourceRanges.map((range, i) => {
      const path = `spec.loadBalancerSourceRanges[${i}]`;
      return cidrAt(typeof range === 'string' ? range.trim() : range, path);
    });
  }
  setIfDefined(out, 'externalTrafficPolicy', policyAt(spec, 'externalTrafficPolicy'));
  setIfDefined(out, 'internalTrafficPolicy', policyAt(spec, 'internalTrafficPolicy'));
  const healthCheckNodePort = optionalInteger(spec, 'healthCheckNodePort', 'spec');
  if (healthCheckNodePort)
    out.healthCheckNodePort = portNumber(healthCheckNodePort, 'spec.healthCheckNodePort');
  const affinity = optionalString(spec, 'sessionAffinity', 'spec');
  if (affinity !== undefined) {
    const known = SESSION_AFFINITIES.get(affinity);
    if (known === undefined) fail('spec.sessionAffinity', `${show(affinity)} is not None or ClientIP`);
    out.sessionAffinity = known;
  }
  const affinityConfig = optionalObject(spec.sessionAffinityConfig, 'spec.sessionAffinityConfig');
  const clientIP = optionalObject(affinityConfig?.clientIP, 'spec.sessionAffinityConfig.clientIP');
  if (clientIP !== undefined) {
    const path = 'spec.sessionAffinityConfig.clientIP';
    const timeoutSeconds = optionalInteger(clientIP, 'timeoutSeconds', path);
    if (timeoutSeconds !== undefined && (timeoutSeconds < 1 || timeoutSeconds > 86400)) {
      fail(`${path}.timeoutSeconds`, `${timeoutSeconds} is not between 1 and 86400`);
    }
    out.sessionAffinityConfig =
      timeoutSeconds === undefined ? { clientIP: {} } : { clientIP: { timeoutSeconds } };
  }
  setIfDefined(out, 'trafficDistribution', optionalString(spec, 'trafficDistribution', 'spec'));
  setIfDefined(
    out,
    'allocateLoadBalancerNodePorts',
    optionalBoolean(spec, 'allocateLoadBalancerNodePorts', 'spec'),
  );

  const service: Writable<Service> = { kind: 'Service', metadata, spec: out };
  const status = optionalObject(raw.status, 'status');
  const loadBalancer = optionalObject(status?.loadBalancer, 'status.loadBalancer');
  const ingress = optionalArray(loadBalancer?.ingress, 'status.loadBalancer.ingress');
  if (ingress !== undefined) service.status = { loadBalancer: { ingress: ingress.map(decodeIngress) } };
  return service;
}

function decodeClusterIPs(spec: JsonObject, out: Writable<ServiceSpec>): void {
  const clusterIP = optionalString(spec, 'clusterIP', 'spec');
  if (clusterIP) out.clusterIP = clusterIPAt(clusterIP, 'spec.clusterIP');
  else if (clusterIP === '') out.clusterIP = '';
  const clusterIPs = optionalArray(spec.clusterIPs, 'spec.clusterIPs');
  if (clusterIPs !== undefined) {
    out.clusterIPs = clusterIPs.map((ip, i) => clusterIPAt(ip, `spec.clusterIPs[${i}]`));
    if (out.clusterIPs.length > 2) fail('spec.clusterIPs', 'at most two (one per IP family)');
    const [first, second] = out.clusterIPs;
    if (out.clusterIP && first !== undefined && first !== out.clusterIP) {
      fail('spec.clusterIPs[0]', `${show(first)} does not match spec.clusterIP ${show(out.clusterIP)}`);
    }
    // One string for the address both fields give (the model keeps every Service).
    if (out.clusterIP && first !== undefined) out.clusterIPs = [out.clusterIP, ...out.clusterIPs.slice(1)];
    if (first !== undefined && second !== undefined && (first === 'None') !== (second === 'None')) {
      fail('spec.clusterIPs[1]', `${show(second)}: a headless Service has no other cluster IP`);
    }
    if (first && second && first !== 'None' && familyOf(first) === familyOf(second)) {
      fail('spec.clusterIPs[1]', `${show(second)} has the same IP family as spec.clusterIPs[0]`);
    }
  }
  const families = optionalArray(spec.ipFamilies, 'spec.ipFamilies');
  if (families !== undefined) {
    out.ipFamilies = families.map((raw, i) => {
      const family = typeof raw === 'string' ? IP_FAMILIES.get(raw) : undefined;
      if (family === undefined) fail(`spec.ipFamilies[${i}]`, `${show(raw)} is not IPv4 or IPv6`);
      const ip = out.clusterIPs?.[i];
      if (ip && ip !== 'None' && familyOf(ip) !== family) {
        fail(`spec.ipFamilies[${i}]`, `${family} does not match spec.clusterIPs[${i}] ${show(ip)}`);
      }
      return family;
    });
  }
  const policy = optionalString(spec, 'ipFamilyPolicy', 'spec');
  setIfDefined(
    out,
    'ipFamilyPolicy',
    policy === undefined ? undefined : (IP_FAMILY_POLICIES.get(policy) ?? policy),
  );
}

function clusterIPAt(value: unknown, path: string): string {
  return value === 'None' ? 'None' : ipAt(value, path);
}

function decodeServicePorts(ports: readonly unknown[]): ServicePortSpec[] {
  const seenPorts = new Map<string, number>();
  const seenNames = new Map<string, number>();
  return ports.map((raw, i) => {
    const path = `spec.ports[${i}]`;
    const entry = requiredObject(raw, path);
    const port = portNumber(entry.port, `${path}.port`);
    const protocol = protocolAt(entry, path);
    const name = optionalString(entry, 'name', path) ?? '';
    const out: Writable<ServicePortSpec> = { port, protocol };
    if (name !== '') out.name = name;
    if (name === '' && ports.length > 1)
      fail(`${path}.name`, 'required when a Service has more than one port');
    const samePort = seenPorts.get(`${port}/${protocol}`);
    if (samePort !== undefined)
      fail(path, `duplicate port ${port}/${protocol} (also spec.ports[${samePort}])`);
    seenPorts.set(`${port}/${protocol}`, i);
    const sameName = seenNames.get(name);
    if (sameName !== undefined)
      fail(`${path}.name`, `duplicate name ${show(name)} (also spec.ports[${sameName}])`);
    seenNames.set(name, i);
    const targetPort = entry.targetPort;
    if (typeof targetPort === 'number' || typeof targetPort === 'string') out.targetPort = targetPort;
    else if (targetPort !== undefined && targetPort !== null)
      fail(`${path}.targetPort`, `${show(targetPort)} is not a port`);
    const nodePort = optionalInteger(entry, 'nodePort', path);
    if (nodePort) out.nodePort = portNumber(nodePort, `${path}.nodePort`);
    setIfDefined(out, 'appProtocol', optionalString(entry, 'appProtocol', path));
    return out;
  });
}

function decodeIngress(raw: unknown, i: number): LoadBalancerIngress {
  const path = `status.loadBalancer.ingress[${i}]`;
  const entry = requiredObject(raw, path);
  const out: Writable<LoadBalancerIngress> = {};
  const ip = optionalString(entry, 'ip', path);
  if (ip) out.ip = ipAt(ip, `${path}.ip`);
  setIfDefined(out, 'hostname', optionalString(entry, 'hostname', path));
  const ipMode = optionalString(entry, 'ipMode', path);
  if (ipMode !== undefined) {
    const known = IP_MODES.get(ipMode);
    if (known === undefined) fail(`${path}.ipMode`, `${show(ipMode)} is not VIP or Proxy`);
    out.ipMode = known;
  }
  return out;
}

function policyAt(spec: JsonObject, field: string): string | undefined {
  const policy = optionalString(spec, field, 'spec');
  if (policy === undefined) return undefined;
  const known = TRAFFIC_POLICIES.get(policy);
  if (known === undefined) fail(`spec.${field}`, `${show(policy)} is not Cluster or Local`);
  return known;
}

// ---- EndpointSlice ----

function decodeEndpointSlice(raw: JsonObject, metadata: ObjectMeta): EndpointSlice {
  const addressType = raw.addressType;
  if (addressType !== 'IPv4' && addressType !== 'IPv6') {
    fail(
      'addressType',
      addressType === undefined ? 'missing' : `${show(addressType)} is not IPv4, IPv6 or FQDN`,
    );
  }
  const out: Writable<EndpointSlice> = { kind: 'EndpointSlice', metadata, addressType };
  const endpoints = optionalArray(raw.endpoints, 'endpoints');
  if (endpoints !== undefined)
    out.endpoints = endpoints.map((ep, i) => decodeEndpoint(ep, `endpoints[${i}]`, addressType));
  const ports = optionalArray(raw.ports, 'ports');
  if (ports !== undefined) out.ports = ports.map((port, i) => decodeSlicePort(port, `ports[${i}]`));
  return out;
}

function decodeEndpoint(raw: unknown, path: string, family: IPFamily): EndpointSliceEndpoint {
  const entry = requiredObject(raw, path);
  const addresses = optionalArray(entry.addresses, `${path}.addresses`);
  if (addresses === undefined || addresses.length === 0)
    fail(`${path}.addresses`, 'at least one address is required');
  const out: Writable<EndpointSliceEndpoint> = {
    addresses: addresses.map((address, i) => {
      const ip = ipAt(address, `${path}.addresses[${i}]`);
      if (familyOf(ip) !== family)
        fail(`${path}.addresses[${i}]`, `${show(address)} is not an ${family} address`);
      return ip;
    }),
  };
  const conditions = optionalObject(entry.conditions, `${path}.conditions`);
  if (conditions !== undefined) {
    const decoded: Writable<EndpointConditions> = {};
    // null and absent both mean "unknown"; the model applies kube-proxy's defaults.
    setIfDefined(decoded, 'ready', optionalBoolean(conditions, 'ready', `${path}.conditions`));
    setIfDefined(decoded, 'serving', optionalBoolean(conditions, 'serving', `${path}.conditions`));
    setIfDefined(decoded, 'terminating', optionalBoolean(conditions, 'terminating', `${path}.conditions`));
    out.conditions = decoded;
  }
  setIfDefined(out, 'nodeName', optionalString(entry, 'nodeName', path));
  setIfDefined(out, 'zone', optionalString(entry, 'zone', path));
  const hints = optionalObject(entry.hints, `${path}.hints`);
  if (hints !== undefined) {
    const decoded: Writable<EndpointHints> = {};
    const forZones = optionalArray(hints.forZones, `${path}.hints.forZones`);
    if (forZones !== undefined)
      decoded.forZones = forZones.map((h, i) => namedHint(h, `${path}.hints.forZones[${i}]`));
    const forNodes = optionalArray(hints.forNodes, `${path}.hints.forNodes`);
    if (forNodes !== undefined)
      decoded.forNodes = forNodes.map((h, i) => namedHint(h, `${path}.hints.forNodes[${i}]`));
    out.hints = decoded;
  }
  return out;
}

function namedHint(raw: unknown, path: string): { readonly name: string } {
  const name = requiredObject(raw, path).name;
  if (typeof name !== 'string' || name === '') fail(`${path}.name`, 'missing');
  return { name };
}

function decodeSlicePort(raw: unknown, path: string): EndpointSlicePort {
  const entry = requiredObject(raw, path);
  const out: Writable<EndpointSlicePort> = { protocol: protocolAt(entry, path) };
  setIfDefined(out, 'name', optionalString(entry, 'name', path));
  const port = optionalInteger(entry, 'port', path);
  if (port !== undefined) out.port = portNumber(port, `${path}.port`);
  return out;
}

// ---- Node ----

function decodeNode(raw: JsonObject, metadata: ObjectMeta): Node {
  const out: Writable<Node> = { kind: 'Node', metadata };
  const spec = optionalObject(raw.spec, 'spec');
  if (spec !== undefined) {
    const decoded: Writable<NonNullable<Node['spec']>> = {};
    const podCIDR = optionalString(spec, 'podCIDR', 'spec');
    if (podCIDR) decoded.podCIDR = cidrAt(podCIDR, 'spec.podCIDR');
    const podCIDRs = optionalArray(spec.podCIDRs, 'spec.podCIDRs');
    if (podCIDRs !== undefined)
      decoded.podCIDRs = podCIDRs.map((cidr, i) => cidrAt(cidr, `spec.podCIDRs[${i}]`));
    const taints = optionalArray(spec.taints, 'spec.taints');
    if (taints !== undefined) {
      decoded.taints = taints.map((taint, i) => {
        const path = `spec.taints[${i}]`;
        const entry = requiredObject(taint, path);
        const key = requiredString(entry, 'key', path);
        const effect = requiredString(entry, 'effect', path);
        const value = optionalString(entry, 'value', path);
        return value === undefined ? { key, effect } : { key, value, effect };
      });
    }
    out.spec = decoded;
  }
  const status = optionalObject(raw.status, 'status');
  const addresses = optionalArray(status?.addresses, 'status.addresses');
  if (addresses !== undefined) {
    out.status = {
      addresses: addresses.map((address, i) => {
        const path = `status.addresses[${i}]`;
        const entry = requiredObject(address, path);
        const type = requiredString(entry, 'type', path);
        const text = requiredString(entry, 'address', path);
        return { type, address: NODE_IP_ADDRESS_TYPES.has(type) ? ipAt(text, `${path}.address`) : text };
      }),
    };
  }
  return out;
}

function decodeServiceCIDR(raw: JsonObject, metadata: ObjectMeta): ServiceCIDR {
  const spec = optionalObject(raw.spec, 'spec');
  const cidrs = optionalArray(spec?.cidrs, 'spec.cidrs') ?? [];
  return {
    kind: 'ServiceCIDR',
    metadata,
    spec: { cidrs: cidrs.map((c, i) => cidrAt(c, `spec.cidrs[${i}]`)) },
  };
}

// ---- field readers ----

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function requiredObject(value: unknown, path: string): JsonObject {
  if (value === undefined || value === null) fail(path, 'missing');
  if (!isObject(value)) fail(path, `${show(value)} is not an object`);
  return value;
}

function optionalObject(value: unknown, path: string): JsonObject | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) fail(path, `${show(value)} is not an object`);
  return value;
}

function optionalArray(value: unknown, path: string): readonly unknown[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) fail(path, `${show(value)} is not a list`);
  return value;
}

function optionalString(object: JsonObject, key: string, path: string): string | undefined {
  const value = object[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') fail(`${path}.${key}`, `${show(value)} is not a string`);
  return value;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * An RFC 3339 time as the API server writes it, as seconds since the epoch: the model orders by it.
 * Date.parse's milliseconds divided by 1000 keep their order and ties exactly (a double resolves
 * far below a millisecond at this size), and the API's whole seconds stay small integers.
 */
function optionalTimestamp(object: JsonObject, key: string): number | undefined {
  const value = optionalString(object, key, 'metadata');
  if (value === undefined || value === '') return undefined;
  const ms = RFC3339.test(value) ? Date.parse(value) : Number.NaN;
  if (!Number.isFinite(ms))
    fail(`metadata.${key}`, `${show(value)} is not an RFC 3339 time (e.g. 2026-01-01T00:00:00Z)`);
  // Whole seconds (as the API server sets them) go through Math.trunc, which gives V8's small
  // integer: a division's result is a heap number, a 16-byte box in each kept Service's metadata.
  const seconds = ms / 1000;
  return Number.isInteger(seconds) ? Math.trunc(seconds) : seconds;
}

function requiredString(object: JsonObject, key: string, path: string): string {
  const value = optionalString(object, key, path);
  if (value === undefined || value === '') fail(`${path}.${key}`, 'missing');
  return value;
}

function optionalBoolean(object: JsonObject, key: string, path: string): boolean | undefined {
  const value = object[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') fail(`${path}.${key}`, `${show(value)} is not true or false`);
  return value;
}

function optionalInteger(object: JsonObject, key: string, path: string): number | undefined {
  const value = object[key];
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value)) fail(`${path}.${key}`, `${show(value)} is not an integer`);
  return value as number;
}

function portNumber(value: unknown, path: string): number {
  if (value === undefined || value === null) fail(path, 'missing');
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 65535) {
    fail(path, `${show(value)} is not a valid port (1-65535)`);
  }
  return value as number;
}

function protocolAt(entry: JsonObject, path: string): string {
  const protocol = PROTOCOLS.get(optionalString(entry, 'protocol', path) ?? 'TCP');
  if (protocol === undefined) fail(`${path}.protocol`, `${show(entry.protocol)} is not TCP, UDP or SCTP`);
  return protocol;
}

function ipAt(value: unknown, path: string): string {
  const ip = typeof value === 'string' ? canonicalIP(value) : undefined;
  if (ip === undefined) fail(path, `${show(value)} is not an IP address`);
  return ip;
}

function cidrAt(value: unknown, path: string): string {
  const cidr = typeof value === 'string' ? canonicalCIDR(value) : undefined;
  if (cidr === undefined) fail(path, `${show(value)} is not a CIDR`);
  return cidr;
}

function setIfDefined<T extends object, K extends keyof T>(target: T, key: K, value: T[K] | undefined): void {
  if (value !== undefined) target[key] = value;
}
