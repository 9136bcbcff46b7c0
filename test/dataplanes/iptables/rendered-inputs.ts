// `kproxy render --mode iptables` output split into the restore inputs it names: each header
// comment line ("# iptables-restore --noflush input ...") starts one input for the tool it names;
// the header of a sync round is left out, and so is a full sync's nfacct step, which `kproxy run`
// takes before the dataplane's first restore (nfacct-objects.ts).

import { printInputs } from '../../../contract/tool-inputs.ts';
import { NFACCT_INPUT } from '../../../dataplanes/iptables/nfacct-objects.ts';

export interface RestoreInput {
  /** iptables-restore or ip6tables-restore. */
  readonly tool: string;
  readonly input: string;
}

export function renderedInputs(rendered: string): RestoreInput[] {
  const inputs: RestoreInput[] = [];
  // A round's header (render --since, src/cli/render-rounds.ts) names no input.
  const withoutRounds = rendered
    .replaceAll(/^# sync round .*\n/gm, '')
    .replace(printInputs([NFACCT_INPUT]), '');
  for (const section of withoutRounds.split(/^(?=# ip6?tables-restore )/m)) {
    if (section === '') continue;
    const newline = section.indexOf('\n');
    const tool = /^# (ip6?tables-restore) --noflush input/.exec(section)?.[1];
    if (tool === undefined) throw new Error(`not a restore input header: ${section.slice(0, newline)}`);
    inputs.push({ tool, input: section.slice(newline + 1) });
  }
  return inputs;
}

/** The restores a live dataplane ran, named like render names them (without -nft/-legacy). */
export function sentInputs(calls: readonly { command: string; input: string }[]): RestoreInput[] {
  return calls
    .filter((c) => c.command.endsWith('-restore'))
    .map((c) => ({ tool: c.command.replace(/-(nft|legacy)-restore$/, '-restore'), input: c.input }));
}
