// What the kernel holds now for `kproxy trace --live --mode ipvs`, in the sections `render`
// prints: the dummy link's addresses, `ipvsadm -Sn`, and the companion tables as nft lists them.

import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import { readLocalAddresses } from '../shared/trace/live-host.ts';

const DUMMY_LINK = 'kproxy-ipvs0';
const COMPANION_TABLE = 'kproxy-ipvs';

export async function readLiveIpvsRules(runner: CommandRunner): Promise<string> {
  const addresses = await readLocalAddresses(runner, DUMMY_LINK);
  const ipvs = await runner.run('ipvsadm', ['-Sn']);
  if (ipvs.exitCode !== 0) throw new DataplaneError(`ipvsadm -Sn: ${ipvs.stderr.trim()}`);
  const tables: string[] = [];
  for (const family of ['ip', 'ip6']) {
    const listed = await runner.run('nft', ['list', 'table', family, COMPANION_TABLE]);
    if (listed.exitCode === 0) tables.push(listed.stdout);
  }
  return [
    `# Addresses on ${DUMMY_LINK}`,
    ...addresses.map((address) => `address add ${address} dev ${DUMMY_LINK}`),
    '# IPVS virtual servers',
    ipvs.stdout,
    '# nftables companion table',
    ...tables,
  ].join('\n');
}
