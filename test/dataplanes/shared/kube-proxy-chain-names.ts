// Upstream kube-proxy's chain names, for the rules written in fixtures/kube-proxy (issue 29): a
// written fixture's chains must be named as kube-proxy names them, so that kproxy's takeover meets
// the names a real node has. Read from upstream's proxiers (fixtures/kube-proxy/SOURCES.md):
// iptables' portProtoHash and servicePortEndpointChainName, nftables' hashAndTruncate,
// servicePortChainNameBase and servicePortEndpointChainNameBase. kube-proxy-chain-names.test.ts
// shows they give the verbatim dumps' names.
import { createHash } from 'node:crypto';

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** Go's base32.StdEncoding (RFC 4648), padding left out: the names use a prefix of it only. */
function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return bits > 0 ? out + BASE32[(value << (5 - bits)) & 31] : out;
}

const sha256Base32 = (text: string) => base32(createHash('sha256').update(text).digest());

/** A Service port's name as kube-proxy prints it (ServicePortName.String()): "ns/name:port". */
export const servicePortName = (namespace: string, name: string, port: string) =>
  port ? `${namespace}/${name}:${port}` : `${namespace}/${name}`;

/** iptables mode's KUBE-SVC-, KUBE-SVL-, KUBE-EXT-, KUBE-FW- chains: prefix + portProtoHash. */
export function iptablesServiceChain(
  prefix: 'KUBE-SVC-' | 'KUBE-SVL-' | 'KUBE-EXT-' | 'KUBE-FW-',
  portName: string,
  protocol: string,
): string {
  return prefix + sha256Base32(portName + protocol.toLowerCase()).slice(0, 16);
}

/** iptables mode's KUBE-SEP- chain of one endpoint ("IP:port"). */
export function iptablesEndpointChain(portName: string, protocol: string, endpoint: string): string {
  return `KUBE-SEP-${sha256Base32(portName + protocol.toLowerCase() + endpoint).slice(0, 16)}`;
}

/** knftables.NameLengthMax (256) less the longest prefix ("affinity-"..., 16): chainNameBaseLengthMax. */
const CHAIN_NAME_BASE_MAX = 256 - 16;

function hashAndTruncate(name: string): string {
  const hashed = `${sha256Base32(name).slice(0, 8)}-${name}`;
  return hashed.length > CHAIN_NAME_BASE_MAX ? `${hashed.slice(0, CHAIN_NAME_BASE_MAX - 3)}...` : hashed;
}

export interface NftServicePort {
  readonly namespace: string;
  readonly name: string;
  readonly protocol: string;
  readonly port: string;
}

/** nftables mode's service-, local-, external-, firewall- chains: prefix + "HASH-ns/name/proto/port". */
export function nftServiceChain(
  prefix: 'service-' | 'local-' | 'external-' | 'firewall-',
  { namespace, name, protocol, port }: NftServicePort,
): string {
  return prefix + hashAndTruncate(`${namespace}/${name}/${protocol.toLowerCase()}/${port}`);
}

/** nftables mode's endpoint- chain (and affinity- set): "HASH-ns/name/proto/port__IP/port". */
export function nftEndpointChain(
  prefix: 'endpoint-' | 'affinity-',
  { namespace, name, protocol, port }: NftServicePort,
  ip: string,
  endpointPort: number,
): string {
  // An IPv6 address's colons are not allowed in a chain name.
  const address = ip.replaceAll(':', '.');
  return (
    prefix +
    hashAndTruncate(`${namespace}/${name}/${protocol.toLowerCase()}/${port}__${address}/${endpointPort}`)
  );
}
