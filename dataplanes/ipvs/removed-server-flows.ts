// The conntrack entries to delete with a real server that went at once (no draining: UDP, SCTP).
// With net.ipv4.vs.conntrack=1 every IPVS connection has a conntrack entry whose reply tuple names
// the real server. Once the server is deleted, net.ipv4.vs.expire_nodest_conn drops IPVS's own
// connection on the flow's next packet, but the conntrack entry would keep the flow translated
// toward the gone server until it times out (SCTP: up to 5 days established), so the client could
// not get through again on the same addresses and ports.
// UDP's entries are the shared conntrack reconciler's (dataplanes/shared/conntrack, as kube-proxy
// does in every mode), so none are listed here; SCTP's are IPVS's alone.
import type { RealServer, VirtualService } from './virtual-servers.ts';

/** `conntrack -D` arguments for the flows of `service` that went to `server` (none for UDP/TCP). */
export function removedServerFlows(service: VirtualService, server: RealServer): string[][] {
  if (service.protocol !== 'SCTP') return [];
  const family = service.family === 'IPv6' ? ['-f', 'ipv6'] : [];
  return [
    [
      ...family,
      '-p',
      'sctp',
      '--orig-dst',
      service.address,
      '--dport',
      `${service.port}`,
      '--reply-src',
      server.address,
    ],
  ];
}
