// The UDP flows of one family as `conntrack -L -f <family> -p udp -o extended` lists them, e.g.
//   ipv4     2 udp      17 26 src=10.100.0.200 dst=10.96.0.53 sport=52929 dport=53 [UNREPLIED]
//     src=10.244.1.10 dst=10.100.0.200 sport=5353 dport=52929 mark=0 use=1
// (one line). The first src/dst/sport/dport are the original direction, the second the reply: a
// DNATed flow's reply source is its endpoint. The extended form names the family on each line, so a
// line of another family is caught rather than misread. A line that cannot be read is skipped and
// counted, never fatal: the reconciler deletes only what it understood.
import { canonicalIP, familyOf } from '../../../contract/base/ip-address.ts';
import type { IPFamily } from '../../../contract/base/ip-family.ts';
import type { Steps } from '../../../contract/base/work-slices.ts';

/** What the reconciler reads of one flow. */
export interface UdpFlow {
  /** Where the client sent it: a service address, or a node address for a node port. */
  readonly origDst: string;
  readonly origDport: number;
  /** Who answers: the endpoint when the flow was DNATed, else origDst itself. */
  readonly replySrc: string;
}

export interface UdpFlowListing {
  readonly flows: readonly UdpFlow[];
  /** Non-empty lines that were not a UDP flow of the family (skipped). */
  readonly unparsed: number;
}

/** The `conntrack` arguments that list what parseUdpFlows reads. */
export function listUdpFlowsArgs(family: IPFamily): string[] {
  return ['-L', '-f', CONNTRACK_FAMILY[family], '-p', 'udp', '-o', 'extended'];
}

export const CONNTRACK_FAMILY: Readonly<Record<IPFamily, string>> = { IPv4: 'ipv4', IPv6: 'ipv6' };

/** Lines read between pauses (a dump can hold 100k+ flows on a DNS-heavy node). */
const LINES_PER_STEP = 2_000;

export function* parseUdpFlows(text: string, family: IPFamily): Steps<UdpFlowListing> {
  const flows: UdpFlow[] = [];
  let unparsed = 0;
  let lines = 0;
  for (const line of text.split('\n')) {
    if (++lines % LINES_PER_STEP === 0) yield;
    if (line.trim() === '') continue;
    const flow = parseLine(line, family);
    if (flow === undefined) unparsed++;
    else flows.push(flow);
  }
  return { flows, unparsed };
}

function parseLine(line: string, family: IPFamily): UdpFlow | undefined {
  const tokens = line.trim().split(/\s+/);
  if (tokens[0] !== CONNTRACK_FAMILY[family] || tokens[2] !== 'udp') return undefined;
  // Values in order of appearance: [original, reply].
  const seen: Record<string, string[]> = { src: [], dst: [], dport: [] };
  for (const token of tokens) {
    const eq = token.indexOf('=');
    if (eq < 0) continue;
    seen[token.slice(0, eq)]?.push(token.slice(eq + 1));
  }
  const origDst = address(seen.dst![0], family);
  const replySrc = address(seen.src![1], family);
  const origDport = port(seen.dport![0]);
  if (origDst === undefined || replySrc === undefined || origDport === undefined) return undefined;
  return { origDst, origDport, replySrc };
}

function address(text: string | undefined, family: IPFamily): string | undefined {
  const ip = text === undefined ? undefined : canonicalIP(text);
  return ip !== undefined && familyOf(ip) === family ? ip : undefined;
}

function port(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{1,5}$/.test(text)) return undefined;
  const n = Number(text);
  return n >= 1 && n <= 65535 ? n : undefined;
}
