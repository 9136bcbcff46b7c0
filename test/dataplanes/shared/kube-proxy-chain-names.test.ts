// Upstream kube-proxy's chain-name hashing (kube-proxy-chain-names.ts) reproduces the names in
// upstream's verbatim test dumps and in real clusters, and the written fixtures follow it: every
// per-Service chain in fixtures/kube-proxy is named from what its own rules say it serves.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import {
  iptablesEndpointChain,
  iptablesServiceChain,
  type NftServicePort,
  nftEndpointChain,
  nftServiceChain,
  servicePortName,
} from './kube-proxy-chain-names.ts';
import { fixture } from './kube-proxy-rule-sets.ts';

const IPTABLES_PREFIXES = ['KUBE-SVC-', 'KUBE-SVL-', 'KUBE-EXT-', 'KUBE-FW-'] as const;

/**
 * The names kube-proxy would give the chains of what an iptables restore's rules serve: each rule's
 * Service port (its comment's first word) and protocol (-p), and each DNAT's endpoint.
 */
function iptablesNamesServed(restore: string): Set<string> {
  const names = new Set<string>();
  for (const line of restore.split('\n')) {
    const comment = /--comment "?([^" ]+)/.exec(line)?.[1];
    const protocol = / -p (\w+)/.exec(line)?.[1];
    if (!comment || !protocol) continue;
    for (const prefix of IPTABLES_PREFIXES) names.add(iptablesServiceChain(prefix, comment, protocol));
    const endpoint = /--to-destination (\S+)/.exec(line)?.[1];
    if (endpoint) names.add(iptablesEndpointChain(comment, protocol, endpoint));
  }
  return names;
}

/** The per-Service chains a restore declares. */
const iptablesChains = (restore: string) =>
  [...restore.matchAll(/^:(KUBE-(?:SVC|SVL|EXT|FW|SEP)-\w+) /gm)].map((match) => match[1]!);

/** An nftables per-Service chain or set name, rebuilt from what follows its hash. */
function nftNameFromItsParts(name: string): string {
  const parsed =
    /^(service|local|external|firewall|endpoint|affinity)-[A-Z2-7]{8}-([^/]+)\/([^/]+)\/([^/]+)\/(.+)$/.exec(
      name,
    );
  assert.ok(parsed, name);
  const [, kind, namespace, svc, protocol, rest] = parsed;
  const [port, endpoint] = rest!.split('__') as [string, string | undefined];
  const servicePort: NftServicePort = { namespace: namespace!, name: svc!, protocol: protocol!, port };
  if (kind === 'endpoint' || kind === 'affinity') {
    const slash = endpoint!.lastIndexOf('/');
    return nftEndpointChain(
      `${kind}-`,
      servicePort,
      endpoint!.slice(0, slash),
      Number(endpoint!.slice(slash + 1)),
    );
  }
  return nftServiceChain(`${kind}-` as 'service-', servicePort);
}

/** Every per-Service chain and set an nftables transaction names. */
const nftNames = (script: string) =>
  new Set(
    [
      ...script.matchAll(
        /\b((?:service|local|external|firewall|endpoint|affinity)-[A-Z2-7]{8}-\S+?)(?=[\s,}]|$)/g,
      ),
    ].map((match) => match[1]!),
  );

describe("kube-proxy's chain names", () => {
  test('real clusters: kube-dns and the API server Service as every kube-proxy names them', () => {
    const dns = servicePortName('kube-system', 'kube-dns', 'dns');
    assert.equal(iptablesServiceChain('KUBE-SVC-', dns, 'udp'), 'KUBE-SVC-TCOU7JCQXEZGVUNU');
    assert.equal(
      iptablesServiceChain('KUBE-SVC-', servicePortName('default', 'kubernetes', 'https'), 'tcp'),
      'KUBE-SVC-NPX46M4PTMTKRN6Y',
    );
    assert.equal(
      nftServiceChain('service-', {
        namespace: 'kube-system',
        name: 'kube-dns',
        protocol: 'udp',
        port: 'dns',
      }),
      'service-FY5PMXPG-kube-system/kube-dns/udp/dns',
    );
  });

  for (const name of [
    'iptables-overall.restore',
    'iptables-etp-local.restore',
    'iptables-udp-clusterip.restore',
  ]) {
    test(`${name}: each KUBE-SVC/SVL/EXT/FW/SEP chain is named from what it serves`, async () => {
      const restore = await readFile(fixture(name), 'utf8');
      const chains = iptablesChains(restore);
      assert.ok(chains.length >= 3, name);
      const served = iptablesNamesServed(restore);
      assert.deepEqual(
        chains.filter((chain) => !served.has(chain)),
        [],
      );
    });
  }

  for (const name of ['nftables-overall.nft', 'nftables-udp-etp-local.nft']) {
    test(`${name}: each service/local/external/firewall/endpoint/affinity name is hashed from itself`, async () => {
      const names = nftNames(await readFile(fixture(name), 'utf8'));
      assert.ok(names.size >= 5, name);
      for (const chain of names) assert.equal(nftNameFromItsParts(chain), chain);
    });
  }

  test('a name differs with the protocol: the same port over UDP and TCP', () => {
    const dns = servicePortName('kube-system', 'kube-dns', 'dns');
    assert.notEqual(
      iptablesServiceChain('KUBE-SVC-', dns, 'tcp'),
      iptablesServiceChain('KUBE-SVC-', dns, 'udp'),
    );
  });
});
