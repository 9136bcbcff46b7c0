// The IP family an address, a service port or a dataplane table belongs to, spelled as Kubernetes
// spells it (Service.spec.ipFamilies, EndpointSlice.addressType).

export type IPFamily = 'IPv4' | 'IPv6';
