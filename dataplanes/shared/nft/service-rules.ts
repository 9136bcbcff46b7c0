// The service spelling both nft tables share (kproxy's nftables table and the IPVS companion):
// the VIP and node port keys, the no-endpoint verdicts, the LoadBalancer firewall and the
// chains that check, reject and masquerade. One place, so the two modes cannot drift apart.
import type { NodeSettings, ServicePort } from '../../../contract/proxy-state.ts';
import type { NoEndpointVerdict, TrafficDecisions } from '../../../contract/traffic-decisions.ts';
import { cidrContains, uncoveredRanges } from '../cidr.ts';
import type { FamilySyntax } from './family-syntax.ts';
import type { RulesetBuilder } from './ruleset.ts';
import { type ChainSpec, fitComment } from './transaction.ts';

/** Key expression of the VIP sets and maps: destination . protocol . port. */
export function vipKey(syntax: FamilySyntax): string {
  return `${syntax.ip} daddr . ${NODEPORT_KEY}`;
}

/** Key expression of the node port sets and maps: protocol . port. */
export const NODEPORT_KEY = 'meta l4proto . th dport';

/** LoadBalancer IPs with source ranges (VIP key), and each one's allowed sources (VIP key . source). */
export const FIREWALL_IPS = 'firewall-ips';
export const FIREWALL_ALLOW = 'firewall-allow';

/** The nft verdict of a no-endpoint map element. */
export function noEndpointVerdict(verdict: NoEndpointVerdict): string {
  return verdict === 'drop' ? 'drop' : 'goto reject-chain';
}

/**
 * LoadBalancer source ranges: traffic to the LB IP from elsewhere is dropped. As in kube-proxy,
 * when a range holds this node's IP the LB IPs are allowed as sources too (a node reaching an LB
 * IP it holds locally uses that IP as source).
 */
export function addFirewall(
  builder: RulesetBuilder,
  sp: ServicePort,
  d: TrafficDecisions,
  proto: string,
  node: NodeSettings,
): void {
  if (!d.sourceRangesApply) return;
  const ranges = sp.loadBalancerSourceRanges;
  const nodeIP = node.nodeIPs[0];
  const fromNode = nodeIP !== undefined && ranges.some((cidr) => cidrContains(cidr, nodeIP));
  // An interval set refuses overlapping elements: only the ranges no other one holds.
  const sources = uncoveredRanges(fromNode ? [...ranges, ...sp.loadBalancerIPs] : ranges);
  for (const lbIP of sp.loadBalancerIPs) {
    const key = `${lbIP} . ${proto} . ${sp.port}`;
    if (builder.hasElement(FIREWALL_IPS, key)) continue;
    builder.addElement(FIREWALL_IPS, { key, comment: fitComment(`${sp.key} source ranges`) });
    for (const source of sources) builder.addElement(FIREWALL_ALLOW, { key: `${key} . ${source}` });
  }
}

/**
 * The chains both tables hold alike: the LoadBalancer firewall check, the no-endpoint reject
 * target, and the mark-then-masquerade pair (the mark bit is kube-proxy's masqueradeBit).
 */
export function verdictChains(syntax: FamilySyntax, node: NodeSettings): ChainSpec[] {
  const vip = vipKey(syntax);
  const mark = `0x${(1 << node.masqueradeBit).toString(16)}`;
  return [
    {
      name: 'firewall-check',
      comment: 'drop LoadBalancer traffic from outside loadBalancerSourceRanges',
      rules: [`${vip} @${FIREWALL_IPS} ${vip} . ${syntax.ip} saddr != @${FIREWALL_ALLOW} drop`],
    },
    { name: 'reject-chain', comment: 'service without any endpoint', rules: ['reject'] },
    {
      name: 'mark-for-masquerade',
      comment: 'ask nat-postrouting to masquerade',
      rules: [`meta mark set meta mark or ${mark}`],
    },
    {
      name: 'masquerading',
      comment: 'masquerade marked packets',
      rules: [
        `meta mark & ${mark} == 0 return`,
        `meta mark set meta mark xor ${mark}`,
        'masquerade fully-random',
      ],
    },
  ];
}
