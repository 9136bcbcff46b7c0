// What the kernel shows of a churn, per mode, pure: the commits `nft monitor` prints, turned into
// the keys of the writes' expectations (churn-schedule.ts), and the final ruleset read back and held
// against the ready endpoints every Service should end with.
// - nftables: an endpoint is in a Service's endpoints while `backends-tcp` maps one of the
//   Service's slots (VIP . port . index) to it. A commit's lines are netted before they count: an
//   endpoint moved to another slot (deleted at one index, added at another) stayed in.
// - iptables (iptables-nft, whose rules are nf_tables rules, so the same monitor sees each
//   iptables-nft-restore commit): an endpoint is in when a rule of the Service's chain jumps to its
//   KPROXY-TEP chain, which a restore writes only in the commit that rewrites that chain; it is out
//   when its TEP chain is deleted, which the kernel allows only once no rule jumps to it, so at or
//   after the commit that stopped sending packets to it (the same commit, unless the restore goes
//   in parts), never before.
// Either way a key is seen when the commit's "# new generation" line arrives: after the kernel has
// committed and notified every change of it.

import type { Endpoint, ServicePort } from '../contract/proxy-state.ts';
import { endpointChainName, serviceChainNames } from '../dataplanes/iptables/chain-names.ts';
import type { Expectation } from './churn-schedule.ts';
import { serviceName, serviceNamespace, syntheticService } from './synthetic-cluster.ts';

export type ChurnMode = 'nftables' | 'iptables';

/** syntheticService's one port and its slices' target port. */
const PORT = 80;
const TARGET_PORT = 8080;

const vip = (i: number): string => syntheticService(i).spec.clusterIP!;

/**
 * Service `i`'s port as the iptables chain names read it (its key and protocol only; the endpoint's
 * address and port): the synthetic Service's one TCP port.
 */
function iptablesPort(i: number): ServicePort {
  return { key: `${serviceNamespace(i)}/${serviceName(i)}:${PORT}/TCP`, protocol: 'TCP' } as ServicePort;
}

const tepChain = (i: number, address: string): string =>
  endpointChainName(iptablesPort(i), { ip: address, port: TARGET_PORT } as Endpoint);

/** The key under which the mode's commits show the expectation met. */
export function expectationKey(mode: ChurnMode, { service, endpoint, present }: Expectation): string {
  const name = mode === 'nftables' ? `${vip(service)}>${endpoint}` : tepChain(service, endpoint);
  return `${name}${present ? '+' : '-'}`;
}

/** VIP . port . index : endpoint . port, one element of an endpoint map. */
const MAP_ELEMENT = /(\d+\.\d+\.\d+\.\d+) \. \d+ \. (\d+) : (\d+\.\d+\.\d+\.\d+) \. \d+/g;
const GENERATION = /^# new generation \d+/;
const ENDPOINTS_MAP = /^(add|delete) element ip kproxy backends-tcp \{/;
const TEP = 'KPROXY-TEP-[A-Z2-7]{16}';
const JUMP = new RegExp(`^add rule ip nat KPROXY-SVC-\\S+ .*\\b(?:jump|goto) (${TEP})\\b`);
const TEP_DELETED = new RegExp(`^delete chain ip nat (${TEP})\\b`);

/**
 * Reads `nft monitor`'s lines one by one; at the end of each commit, the keys of what it put in
 * (`+`) and took out (`-`), netted over the commit.
 */
export class CommitReader {
  readonly #mode: ChurnMode;
  readonly #in = new Set<string>();
  readonly #out = new Set<string>();

  constructor(mode: ChurnMode) {
    this.#mode = mode;
  }

  /** The commit's keys when `line` ends one, else undefined. */
  line(line: string): string[] | undefined {
    if (GENERATION.test(line)) {
      const keys = [...[...this.#in].map((k) => `${k}+`), ...[...this.#out].map((k) => `${k}-`)];
      this.#in.clear();
      this.#out.clear();
      return keys;
    }
    if (this.#mode === 'nftables') {
      const kind = ENDPOINTS_MAP.exec(line)?.[1];
      if (kind === undefined) return undefined;
      for (const [, address, , endpoint] of line.matchAll(MAP_ELEMENT))
        this.#note(`${address}>${endpoint}`, kind === 'add');
      return undefined;
    }
    const jump = JUMP.exec(line)?.[1];
    if (jump !== undefined) this.#note(jump, true);
    const deleted = TEP_DELETED.exec(line)?.[1];
    if (deleted !== undefined) this.#note(deleted, false);
    return undefined;
  }

  #note(key: string, added: boolean): void {
    const [here, other] = added ? [this.#in, this.#out] : [this.#out, this.#in];
    if (!other.delete(key)) here.add(key);
  }
}

/** The commands whose output is the ruleset the final check reads, in the mode's own spelling. */
export function finalListing(mode: ChurnMode): readonly (readonly string[])[] {
  return mode === 'nftables'
    ? [
        ['nft', 'list', 'map', 'ip', 'kproxy', 'backends-tcp'],
        ['nft', 'list', 'map', 'ip', 'kproxy', 'backends-tcp-counts'],
      ]
    : [['iptables-nft-save', '-t', 'nat']];
}

const COUNT_ELEMENT = /(\d+\.\d+\.\d+\.\d+) \. \d+ : (\d+)\b/g;
const SAVED_JUMP = new RegExp(`^-A (KPROXY-SVC-\\S+) .*-j (${TEP})\\b`);
const SAVED_DNAT = new RegExp(`^-A (${TEP}) .*-j DNAT .*--to-destination (\\S+)`);

/**
 * The final ruleset, read line by line, held against what each Service should hold: the mode's
 * parts of each Service's endpoints (nftables: its slots and its count; iptables: its chain's jumps
 * and each TEP chain's DNAT).
 */
export class FinalRuleset {
  readonly #mode: ChurnMode;
  /** nftables: VIP → index → endpoint; iptables: SVC chain → TEP chain → "" (filled by DNAT). */
  readonly #slots = new Map<string, Map<string, string>>();
  readonly #counts = new Map<string, number>();
  readonly #dnat = new Map<string, string>();
  #mapLines = false;

  constructor(mode: ChurnMode) {
    this.#mode = mode;
  }

  line(line: string): void {
    if (this.#mode === 'nftables') {
      // The listing's header names the map its elements belong to.
      if (line.includes('map backends-tcp ')) this.#mapLines = true;
      if (line.includes('map backends-tcp-counts ')) this.#mapLines = false;
      const elements = this.#mapLines ? line.matchAll(MAP_ELEMENT) : [];
      for (const [, address, index, endpoint] of elements) this.#slot(address!, index!, endpoint!);
      if (!this.#mapLines)
        for (const [, address, count] of line.matchAll(COUNT_ELEMENT))
          this.#counts.set(address!, Number(count));
      return;
    }
    const jump = SAVED_JUMP.exec(line);
    if (jump) this.#slot(jump[1]!, jump[2]!, '');
    const dnat = SAVED_DNAT.exec(line);
    if (dnat) this.#dnat.set(dnat[1]!, dnat[2]!);
  }

  #slot(owner: string, slot: string, value: string): void {
    const slots = this.#slots.get(owner) ?? new Map<string, string>();
    this.#slots.set(owner, slots.set(slot, value));
  }

  /** Services 0..services-1 whose endpoints in the ruleset are not `expected(i)`'s addresses. */
  mismatches(services: number, expected: (i: number) => readonly string[]): number[] {
    const wrong: number[] = [];
    for (let i = 0; i < services; i++) if (!this.#holds(i, expected(i))) wrong.push(i);
    return wrong;
  }

  #holds(i: number, addresses: readonly string[]): boolean {
    const sorted = (list: Iterable<string>) => [...list].sort().join(',');
    if (this.#mode === 'nftables') {
      const slots = this.#slots.get(vip(i)) ?? new Map<string, string>();
      const indexes = [...slots.keys()].map(Number).sort((a, b) => a - b);
      return (
        sorted(slots.values()) === sorted(addresses) &&
        indexes.every((index, n) => index === n) &&
        (this.#counts.get(vip(i)) ?? 0) === addresses.length
      );
    }
    const jumps = this.#slots.get(serviceChainNames(iptablesPort(i)).cluster) ?? new Map<string, string>();
    const targets = [...jumps.keys()].map((chain) => this.#dnat.get(chain) ?? `${chain}?`);
    return (
      sorted(jumps.keys()) === sorted(addresses.map((a) => tepChain(i, a))) &&
      sorted(targets) === sorted(addresses.map((a) => `${a}:${TARGET_PORT}`))
    );
  }
}
