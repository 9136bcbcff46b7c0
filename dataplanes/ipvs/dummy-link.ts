// The dummy link that holds the service addresses (kube-proxy's kube-ipvs0, here kproxy-ipvs0), so
// the node accepts packets for them and IPVS sees them in LOCAL_IN. Driven with `ip` through the
// command runner (its -batch input is what the plan renders).

import type { CleanupCommand } from '../../contract/dataplane.ts';
import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import { DUMMY_LINK } from './ipvs-plan.ts';
import { addressBatch } from './ipvs-render.ts';

export class CommandError extends DataplaneError {
  constructor(command: string, stderr: string) {
    super(`${command} failed: ${stderr.trim()}`);
    this.name = 'CommandError';
  }
}

async function ip(runner: CommandRunner, args: readonly string[], input?: string): Promise<string> {
  const result = await runner.run('ip', args, input);
  if (result.exitCode !== 0) throw new CommandError(`ip ${args.join(' ')}`, result.stderr);
  return result.stdout;
}

const SHOW_LINK = ['link', 'show', 'dev', DUMMY_LINK];

/** The link's deletion (its addresses go with it), while it exists. */
export const LINK_DELETION: CleanupCommand = {
  what: `link ${DUMMY_LINK}`,
  command: 'ip',
  args: ['link', 'del', DUMMY_LINK],
  when: [{ command: 'ip', args: SHOW_LINK }],
};

export async function linkExists(runner: CommandRunner, link = DUMMY_LINK): Promise<boolean> {
  return (await runner.run('ip', ['link', 'show', 'dev', link])).exitCode === 0;
}

interface IpAddressJson {
  readonly addr_info?: readonly { readonly local?: string; readonly scope?: string }[];
}

/** The addresses on the link (none when it does not exist); link-local ones are the kernel's. */
export async function boundAddresses(runner: CommandRunner): Promise<string[]> {
  if (!(await linkExists(runner))) return [];
  const links = JSON.parse(
    (await ip(runner, ['-j', 'address', 'show', 'dev', DUMMY_LINK])) || '[]',
  ) as IpAddressJson[];
  return links
    .flatMap((l) => l.addr_info ?? [])
    .flatMap((a) => (a.local && a.scope !== 'link' ? [a.local] : []));
}

/**
 * Creates the link (when `createLink`), adds and removes addresses, in one `ip -batch` run. Like
 * kube-ipvs0 the link stays down: local routes do not need it up.
 */
export async function changeAddresses(
  runner: CommandRunner,
  add: readonly string[],
  remove: readonly string[],
  createLink = false,
): Promise<void> {
  const lines = addressBatch(createLink, add, remove);
  if (lines.length > 0) await ip(runner, ['-batch', '-'], lines.map((l) => `${l}\n`).join(''));
}
