// What a trace finds: the steps one possible path took through the rules, and where it ended.
// A trace forks where the rules choose at random (numgen, statistic, an IPVS scheduler); every
// branch carries its probability, and the branches of one trace sum to 1.
import type { TracePacket } from './packet.ts';

/** One thing the packet met: a chain entered, a rule or map element that matched, a rule not understood. */
export interface TraceStep {
  readonly hook: string;
  /** "ip kproxy", "nat", "ipvs": where the chain lives. */
  readonly table: string;
  readonly chain: string;
  readonly kind: 'chain' | 'rule' | 'element' | 'unknown' | 'ipvs';
  /** The rule or element text as read. */
  readonly text: string;
  /** The Service port the rule or element says it serves ("ns/name:port/PROTO"), when it says. */
  readonly service?: string;
  readonly note?: string;
}

/** Why the source address changes (or not) before the endpoint sees the packet. */
export interface Masquerade {
  /** The rule that masqueraded. */
  readonly rule: string;
  /** The rule that asked for it (set the masquerade mark), when it was another one. */
  readonly requestedBy?: string;
}

export type TraceOutcome =
  | {
      readonly kind: 'dnat';
      readonly endpoint: string;
      readonly masquerade?: Masquerade;
      /** Source and destination the endpoint sees ("node address" when masqueraded). */
      readonly seenSource: string;
      readonly seenDestination: string;
      /** How session affinity treats this client, when the path records it. */
      readonly affinity?: string;
    }
  | { readonly kind: 'reject' | 'drop'; readonly rule: string }
  | {
      readonly kind: 'no-service';
      readonly delivered: 'local' | 'forwarded';
      readonly masquerade?: Masquerade;
      readonly seenSource: string;
      readonly seenDestination: string;
    };

export interface TraceBranch {
  readonly probability: number;
  readonly service?: string;
  readonly steps: readonly TraceStep[];
  readonly outcome: TraceOutcome;
}

export interface TraceReport {
  readonly mode: string;
  readonly packet: TracePacket;
  readonly branches: readonly TraceBranch[];
  /** Tables, chains or rules that are not kproxy's or not understood: shown, never evaluated. */
  readonly notEvaluated: readonly string[];
}

export const MASQUERADED_SOURCE = 'node address (masquerade)';
