// One possible path of the packet through the node's hooks, and the walk every mode shares:
// prerouting, the routing decision (input or forward), postrouting; or output for the node's own
// traffic. Each mode says what its rules do at one hook; the walk strings the hooks together.
import {
  MASQUERADED_SOURCE,
  type Masquerade,
  type TraceBranch,
  type TraceOutcome,
  type TraceStep,
} from './outcome.ts';
import { hostPort, isLocalAddress, type TraceHost, type TracePacket, type TraceProtocol } from './packet.ts';

export type HookName = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';

/** The packet as it stands at some point of one path, with what the path learned so far. */
export interface Flow {
  readonly probability: number;
  readonly source: string;
  readonly sourcePort: number;
  readonly destination: string;
  readonly port: number;
  readonly protocol: TraceProtocol;
  /** The connection's destination before any rewrite (conntrack's original tuple). */
  readonly originalDestination: string;
  readonly originalPort: number;
  readonly mark: number;
  /** Set once a rule rewrote the destination (conntrack's "dnat" status from then on). */
  readonly dnat?: string;
  readonly masquerade?: Masquerade;
  /** The rule that last changed the mark: the reason a later masquerade-by-mark happens. */
  readonly markedBy?: string;
  /** The last rule that jumped or went to a chain: why a mark set in that chain was set. */
  readonly lastJump?: string;
  readonly affinity?: string;
  readonly service?: string;
  readonly verdict?: { readonly kind: 'drop' | 'reject'; readonly rule: string };
  readonly steps: readonly TraceStep[];
}

/** What one mode's rules do to a flow at one hook: the flows that leave it (several when it forks). */
export type HookEvaluator = (hook: HookName, flow: Flow) => readonly Flow[];

export function startFlow(packet: TracePacket): Flow {
  return {
    probability: 1,
    source: packet.source,
    sourcePort: packet.sourcePort,
    destination: packet.destination,
    port: packet.port,
    protocol: packet.protocol,
    originalDestination: packet.destination,
    originalPort: packet.port,
    mark: 0,
    steps: [],
  };
}

/** Every path of the packet through the node, each ending in a verdict, a local delivery or a send. */
export function walkHooks(packet: TracePacket, host: TraceHost, evaluate: HookEvaluator): TraceBranch[] {
  const through = (hooks: readonly HookName[], flows: readonly Flow[]) =>
    hooks.reduce<readonly Flow[]>(
      (current, hook) => current.flatMap((flow) => (flow.verdict ? [flow] : evaluate(hook, flow))),
      flows,
    );
  const start = [startFlow(packet)];
  const isLocal = (flow: Flow) => isLocalAddress(host, flow.destination);
  // IPVS rewrites the destination at input: such a packet leaves again through postrouting.
  const throughInput = (flow: Flow) =>
    through(['input'], [flow]).flatMap((after) =>
      after.verdict || isLocal(after)
        ? [{ flow: after, local: true }]
        : through(['postrouting'], [after]).map((sent) => ({ flow: sent, local: false })),
    );
  let ended: readonly { flow: Flow; local: boolean }[];
  if (packet.via === 'node') {
    // The node's own traffic: output, postrouting, and back in through input when it stays here.
    ended = through(['output', 'postrouting'], start).flatMap((flow) =>
      flow.verdict || !isLocal(flow) ? [{ flow, local: isLocal(flow) }] : throughInput(flow),
    );
  } else {
    ended = through(['prerouting'], start).flatMap((flow) => {
      if (flow.verdict) return [{ flow, local: isLocal(flow) }];
      if (isLocal(flow)) return throughInput(flow);
      return through(['forward', 'postrouting'], [flow]).map((after) => ({ flow: after, local: false }));
    });
  }
  return ended.map(({ flow, local }) => toBranch(flow, local));
}

function toBranch(flow: Flow, local: boolean): TraceBranch {
  const seenSource = flow.masquerade ? MASQUERADED_SOURCE : flow.source;
  const seenDestination = hostPort(flow.destination, flow.port);
  let outcome: TraceOutcome;
  if (flow.verdict) outcome = { kind: flow.verdict.kind, rule: flow.verdict.rule };
  else if (flow.dnat !== undefined)
    outcome = {
      kind: 'dnat',
      endpoint: flow.dnat,
      ...(flow.masquerade && { masquerade: flow.masquerade }),
      seenSource,
      seenDestination,
      ...(flow.affinity && { affinity: flow.affinity }),
    };
  else
    outcome = {
      kind: 'no-service',
      delivered: local ? 'local' : 'forwarded',
      ...(flow.masquerade && { masquerade: flow.masquerade }),
      seenSource,
      seenDestination,
    };
  return {
    probability: flow.probability,
    ...(flow.service && { service: flow.service }),
    steps: flow.steps,
    outcome,
  };
}

/** The Service port a kproxy comment names ("shop/cart:80/TCP endpoint ..." → "shop/cart:80/TCP"). */
export function serviceOfComment(comment: string | undefined): string | undefined {
  return comment?.match(/^(\S+\/\S+:\d+\/(?:TCP|UDP|SCTP))\b/)?.[1];
}

/** The flow with one more step, taking the Service the step names when the flow had none yet. */
export function withStep(flow: Flow, step: TraceStep): Flow {
  return { ...flow, steps: [...flow.steps, step], service: flow.service ?? step.service };
}
