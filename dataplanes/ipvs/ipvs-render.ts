// A plan as text: what dry-run prints and golden files hold. Three sections, each the input of the
// tool it names: the virtual servers as `ipvsadm --restore` lines, the dummy link's addresses as
// `ip -batch` lines, and the companion table as an `nft -f` script.
import { DUMMY_LINK, type IpvsOp, type IpvsPlan } from './ipvs-plan.ts';
import { hostPort, type RealServer, type VirtualService } from './virtual-servers.ts';

const PROTOCOL_FLAG = { TCP: '-t', UDP: '-u', SCTP: '--sctp-service' } as const;

function serviceArgs(service: VirtualService): string {
  return `${PROTOCOL_FLAG[service.protocol]} ${hostPort(service.address, service.port)}`;
}

function settingsArgs(service: VirtualService): string {
  const persistence = service.persistenceTimeout > 0 ? ` -p ${service.persistenceTimeout}` : '';
  return `-s ${service.scheduler}${persistence}`;
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

/** `ip -batch` line for an address of the dummy link. */
export function addressLine(verb: 'add' | 'del', address: string): string {
  const bits = address.includes(':') ? 128 : 32;
  return `address ${verb} ${address}/${bits} dev ${DUMMY_LINK}`;
}

function fullIpvsLines(plan: Extract<IpvsPlan, { kind: 'full' }>): string[] {
  const lines: string[] = [];
  for (const vs of plan.desired.virtualServers.values()) {
    lines.push(ipvsadmLine({ op: 'add-service', service: vs }));
    for (const server of vs.realServers) lines.push(ipvsadmLine({ op: 'add-server', service: vs, server }));
  }
  return lines;
}

export function renderPlan(plan: IpvsPlan): string {
  const ipvs = plan.kind === 'full' ? fullIpvsLines(plan) : plan.ops.map(ipvsadmLine);
  const addresses =
    plan.kind === 'full'
      ? [
          `link add ${DUMMY_LINK} type dummy`,
          ...plan.desired.boundAddresses.map((a) => addressLine('add', a)),
        ]
      : [
          ...plan.addresses.add.map((a) => addressLine('add', a)),
          ...plan.addresses.delete.map((a) => addressLine('del', a)),
        ];
  const section = (title: string, lines: readonly string[]): string =>
    `# ${title}\n${lines.map((l) => `${l}\n`).join('')}`;
  return [
    section(`IPVS virtual servers (${plan.kind}; ipvsadm --restore)`, ipvs),
    section(`Addresses on ${DUMMY_LINK} (ip -batch)`, addresses),
    `# nftables companion table (nft -f)\n${plan.nft.toString()}`,
  ].join('');
}
