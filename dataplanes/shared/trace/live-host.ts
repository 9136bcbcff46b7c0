// The node's own addresses, read from the kernel for `kproxy trace --live` (`ip -j address`).
import type { CommandRunner } from '../command-runner.ts';

interface IpAddressJson {
  readonly ifname?: string;
  readonly addr_info?: readonly { readonly local?: string }[];
}

/** Every address of every link, or of one link (`device`). */
export async function readLocalAddresses(runner: CommandRunner, device?: string): Promise<string[]> {
  const args = ['-j', 'address', 'show', ...(device ? ['dev', device] : [])];
  const result = await runner.run('ip', args);
  if (result.exitCode !== 0) return [];
  const links = JSON.parse(result.stdout || '[]') as IpAddressJson[];
  return links.flatMap((link) => (link.addr_info ?? []).flatMap((info) => (info.local ? [info.local] : [])));
}
