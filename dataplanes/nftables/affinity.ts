// Session affinity (ClientIP): kube-proxy's shape, the one place with per-service chains and sets.
// Per service port and endpoint set, a chain checks each endpoint's "recent clients" set
// (dynamic, with the affinity timeout) and falls back to a random pick; each endpoint's chain
// records the client and DNATs. Stickiness is per client per service port, shared by every
// address of the port; a removed endpoint's set and chain are deleted, so it is never chosen
// again. Names carry a hash of the service port key, the timeout and the endpoint, so other
// endpoints keep their clients when one changes.
import { createHash } from 'node:crypto';
import type { Endpoint, ServicePort } from '../../src/model/proxy-state.ts';
import type { EndpointSetKind } from './endpoint-dispatch.ts';
import type { FamilySyntax } from './family-syntax.ts';
import type { RulesetBuilder } from './ruleset.ts';
import { fitComment } from './transaction.ts';

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/** Declares the affinity chains and sets for `endpoints`; returns the chain to go to. */
export function addAffinityChains(
  builder: RulesetBuilder,
  syntax: FamilySyntax,
  servicePort: ServicePort,
  endpoints: readonly Endpoint[],
  setKind: EndpointSetKind,
): string {
  const timeout = servicePort.sessionAffinity?.timeoutSeconds;
  if (timeout === undefined) throw new Error(`${servicePort.key} has no session affinity`);
  const id = `${servicePort.key}|${timeout}`;
  const proto = servicePort.protocol.toLowerCase();
  const endpointChains = endpoints.map((ep) => {
    const name = `affinity-${shortHash(`${id}|${ep.ip}|${ep.port}`)}`;
    builder.addSet({
      name,
      kind: 'set',
      type: `type ${syntax.addrType}`,
      flags: ['dynamic', 'timeout'],
      timeoutSeconds: timeout,
      comment: fitComment(`${servicePort.key} clients of ${ep.ip}:${ep.port}`),
    });
    builder.addChain({
      name,
      comment: fitComment(`${servicePort.key} endpoint ${ep.ip}:${ep.port}`),
      rules: [
        `update @${name} { ${syntax.ip} saddr }`,
        `meta l4proto ${proto} dnat ${syntax.ip} to ${syntax.hostPort(ep.ip, ep.port)}`,
      ],
    });
    return name;
  });
  const name = `affinity-${shortHash(id)}-${setKind}`;
  const pick = endpointChains.map((chain, i) => `${i} : goto ${chain}`).join(', ');
  builder.addChain({
    name,
    comment: fitComment(`${servicePort.key} ${setKind} endpoints, ClientIP affinity`),
    rules: [
      ...endpointChains.map((chain) => `${syntax.ip} saddr @${chain} goto ${chain}`),
      `numgen random mod ${endpointChains.length} vmap { ${pick} }`,
    ],
  });
  return name;
}
