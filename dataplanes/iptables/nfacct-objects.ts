// The nfacct objects iptables mode keeps (kube-proxy's names): `kproxy run` creates them at start,
// over netlink, before its first restore, whose rules may count in them (`-m nfacct`, which the
// kernel refuses for a missing object). One list, in run's order: run creates from it and render
// prints it, as the `nfacct add` commands of Debian's nfacct package.

import type { ToolInput } from '../../contract/tool-inputs.ts';
import { CT_STATE_INVALID_COUNTER, LOCALHOST_NODEPORTS_COUNTER } from './chain-names.ts';

export const NFACCT_COUNTERS = [LOCALHOST_NODEPORTS_COUNTER, CT_STATE_INVALID_COUNTER] as const;

export type NfacctCounterName = (typeof NFACCT_COUNTERS)[number];

/** The nfacct tool's command that creates one (it refuses an existing one, as on an empty node). */
function addCommand(name: string): string {
  return `nfacct add ${name}`;
}

/** Render's first step of a full sync: the objects, as shell commands. */
export const NFACCT_INPUT: ToolInput = {
  title: 'nfacct objects, made before the first restore (nfacct add; kproxy run makes them over netlink)',
  input: NFACCT_COUNTERS.map((name) => `${addCommand(name)}\n`).join(''),
};

/** A line of NFACCT_INPUT: no rule, so the tracer skips it. */
export function isNfacctCommand(line: string): boolean {
  return NFACCT_COUNTERS.some((name) => line === addCommand(name));
}
