// A plan as text: what dry-run prints and golden files hold. Sections in the order the live
// dataplane sends them, each the input of the tool it names: the dummy link and its addresses as
// `ip -batch` lines, the virtual servers as `ipvsadm --restore` lines (the live dataplane sends the
// same operations over netlink), the companion table as an `nft -f` script, and last (incremental)
// the addresses that go away, once nothing serves them.
import type { CleanupCommand } from '../../contract/dataplane.ts';
import { printInputs, type ToolInput } from '../../contract/tool-inputs.ts';
import type { NftTransaction } from '../shared/nft/transaction.ts';
import { DUMMY_LINK, type IpvsOp, type IpvsPlan } from './ipvs-plan.ts';
import { hostPort, type RealServer, type VirtualService } from './virtual-servers.ts';

const PROTOCOL_FLAG = { TCP: '-t', UDP: '-u', SCTP: '--sctp-service' } as const;

function serviceArgs(service: VirtualService): string {
  return `${PROTOCOL_FLAG[service.protocol]} ${hostPort(service.address, service.port)}`;
}

function settingsArgs(service: VirtualService): string {
  const persistence = service.persistenceTimeout > 0 ? ` -p ${service.persistenceTimeout}` : '';
  const flags = service.schedulerFlags.length > 0 ? ` -b ${service.schedulerFlags.join(',')}` : '';
  return `-s ${service.scheduler}${flags}${persistence}`;
}

function serverArgs(service: VirtualService, server: RealServer): string {
  return `${serviceArgs(service)} -r ${hostPort(server.address, server.port)} -m -w ${server.weight}`;
}

/** One `ipvsadm --restore` line. */
export function ipvsadmLine(op: IpvsOp): string {
  switch (op.op) {
    case 'add-service':
      return `-A ${serviceArgs(op.service)} ${settingsArgs(op.service)}`;
    case 'edit-service':
      return `-E ${serviceArgs(op.service)} ${settingsArgs(op.service)}`;
    case 'delete-service':
      return `-D ${serviceArgs(op.service)}`;
    case 'add-server':
      return `-a ${serverArgs(op.service, op.server)}`;
    case 'edit-server':
    case 'drain-server':
      return `-e ${serverArgs(op.service, op.server)}`;
    case 'delete-server':
      return `-d ${serviceArgs(op.service)} -r ${hostPort(op.server.address, op.server.port)}`;
  }
}

/**
 * The removal of one virtual server by ipvsadm, while ip_vs is loaded (ipvsadm would load it, as
 * opening IPVS would: after a reboot there is nothing to remove) and ipvsadm lists the server:
 * cleanup's command for a purge (cleanup() itself removes it over netlink, ipvsadm being only
 * recommended).
 */
export function ipvsadmDeletion(service: VirtualService, what: string): CleanupCommand {
  return {
    what,
    command: 'ipvsadm',
    args: ipvsadmLine({ op: 'delete-service', service }).split(' '),
    when: [
      { command: 'test', args: ['-e', '/proc/net/ip_vs'] },
      { command: 'ipvsadm', args: ['-L', '-n', ...serviceArgs(service).split(' ')] },
    ],
  };
}

/** `ip -batch` line for an address of the dummy link. */
function addressLine(verb: 'add' | 'del', address: string): string {
  const bits = address.includes(':') ? 128 : 32;
  return `address ${verb} ${address}/${bits} dev ${DUMMY_LINK}`;
}

/** `ip -batch` lines: the link when it is missing, the addresses to add, then those to remove. */
export function addressBatch(
  createLink: boolean,
  add: readonly string[],
  remove: readonly string[],
): string[] {
  return [
    ...(createLink ? [`link add ${DUMMY_LINK} type dummy`] : []),
    ...add.map((a) => addressLine('add', a)),
    ...remove.map((a) => addressLine('del', a)),
  ];
}

function fullIpvsLines(plan: Extract<IpvsPlan, { kind: 'full' }>): string[] {
  const lines: string[] = [];
  for (const vs of plan.desired.virtualServers.values()) {
    lines.push(ipvsadmLine({ op: 'add-service', service: vs }));
    for (const server of vs.realServers) lines.push(ipvsadmLine({ op: 'add-server', service: vs, server }));
  }
  return lines;
}

/**
 * The plan's steps in the order the live dataplane applies them. A full plan's companion tables
 * go on an empty node in three steps (hooks-last.ts): with `chunks` each apart, else joined, the
 * one transaction that replaces them on a node holding them.
 */
export function planInputs(plan: IpvsPlan, chunks = false): ToolInput[] {
  const lines = (title: string, command: string, batch: readonly string[]): ToolInput => ({
    title,
    command,
    input: batch.map((line) => `${line}\n`).join(''),
  });
  const nft = (what: string, tx: NftTransaction): ToolInput => ({
    title: `nftables companion table (${what}; nft -f)`,
    command: NFT_COMMAND,
    input: tx.toString(),
  });
  if (plan.kind === 'full') {
    const { structure, elements, hooks } = plan.coldStart;
    // As on an empty node: no link yet, no stale address to remove.
    return [
      lines(
        `Addresses on ${DUMMY_LINK} (full; ip -batch)`,
        IP_BATCH,
        addressBatch(true, plan.desired.boundAddresses, []),
      ),
      lines('IPVS virtual servers (full; ipvsadm --restore)', IPVSADM_RESTORE, fullIpvsLines(plan)),
      ...(chunks
        ? [
            nft('full, step 1/3: table, sets, regular chains', structure),
            nft('full, step 2/3: elements, by nf_tables netlink in kproxy run', elements),
            nft('full, step 3/3: the hooks', hooks),
          ]
        : [nft('full, on an empty node in 3 steps: render --chunks', plan.nft)]),
    ];
  }
  return [
    lines(
      `Addresses added to ${DUMMY_LINK} (incremental; ip -batch)`,
      IP_BATCH,
      addressBatch(false, plan.addresses.add, []),
    ),
    lines(
      'IPVS virtual servers (incremental; ipvsadm --restore)',
      IPVSADM_RESTORE,
      plan.ops.map(ipvsadmLine),
    ),
    nft('incremental', plan.nft),
    lines(
      `Addresses removed from ${DUMMY_LINK} (incremental; ip -batch)`,
      IP_BATCH,
      addressBatch(false, [], plan.addresses.delete),
    ),
  ];
}

const IP_BATCH = 'ip -batch -';
const IPVSADM_RESTORE = 'ipvsadm --restore';
const NFT_COMMAND = 'nft -f -';

/** printInputs(planInputs(plan, chunks)): what render (or render --chunks) prints. */
export function renderPlan(plan: IpvsPlan, chunks = false): string {
  return printInputs(planInputs(plan, chunks));
}
