// The kernel's IPVS table over generic netlink, behind a small interface (tests use a fake). The
// socket lives in the network namespace of the process that opens it.
import { DataplaneError } from '../../contract/dataplane-error.ts';
import { parseAttributes } from '../shared/netlink-attributes.ts';
import {
  type DatagramSocket,
  errnoName,
  type NetlinkAnswers,
  NetlinkDatagram,
  NetlinkSocket,
  NLM_F_DUMP,
  NoAnswer,
  openGenericNetlink,
} from '../shared/netlink-socket.ts';
import {
  type DumpedRealServer,
  decodeDest,
  decodeService,
  IPVS_CMD,
  IPVS_GENL_NAME,
  IPVS_GENL_VERSION,
  type IpvsTimeouts,
  writeDestIdentityMessage,
  writeDestMessage,
  writeServiceIdentityMessage,
  writeServiceMessage,
  writeTimeoutsMessage,
} from './ipvs-messages.ts';
import type { IpvsOp } from './ipvs-plan.ts';
import { type RealServer, realServerKey, type VirtualService, virtualServerKey } from './virtual-servers.ts';

/** One IPVS command: a plan's operation as the kernel takes it (draining is an edit to weight 0). */
export type IpvsCommand = Exclude<IpvsOp, { op: 'drain-server' }>;

/** The commands of a send the kernel refused, by their index in the send, each with its own error. */
export type IpvsRefusals = ReadonlyMap<number, IpvsError>;

export interface IpvsClient {
  listServices(): Promise<VirtualService[]>;
  listServers(service: VirtualService): Promise<DumpedRealServer[]>;
  /**
   * Sends the commands together, in order, and answers once the kernel handled all of them. The
   * kernel handles each as if sent alone: a refused command stops none after it.
   */
  send(commands: readonly IpvsCommand[]): Promise<IpvsRefusals>;
  addService(service: VirtualService): Promise<void>;
  editService(service: VirtualService): Promise<void>;
  /**
   * Deletes a virtual service; false when the kernel had no such service (ENOENT, ESRCH). A
   * cleanup deletes after a drain of up to minutes, in which another owner may have removed it.
   */
  deleteService(service: VirtualService): Promise<boolean>;
  addServer(service: VirtualService, server: RealServer): Promise<void>;
  editServer(service: VirtualService, server: RealServer): Promise<void>;
  deleteServer(service: VirtualService, server: RealServer): Promise<void>;
  setTimeouts(timeouts: IpvsTimeouts): Promise<void>;
  close(): void;
}

export type IpvsErrorCode = 'EEXIST' | 'ENOENT' | 'ESRCH' | 'unavailable' | 'timeout' | 'other';

/** A refused IPVS command, classified so callers decide on the kind of failure. */
export class IpvsError extends DataplaneError {
  readonly code: IpvsErrorCode;

  constructor(code: IpvsErrorCode, message: string) {
    super(message);
    this.name = 'IpvsError';
    this.code = code;
  }
}

/** A refusal saying the service or server is not there (any more). */
export function isGone(err: unknown): boolean {
  return err instanceof IpvsError && (err.code === 'ENOENT' || err.code === 'ESRCH');
}

/** Sends one command; its refusal is thrown. */
export async function sendOne(client: Pick<IpvsClient, 'send'>, command: IpvsCommand): Promise<void> {
  const refused = (await client.send([command])).get(0);
  if (refused !== undefined) throw refused;
}

/** The kernel refused `what` with `errno`. */
function refusal(what: string, errno: number): IpvsError {
  const name = errnoName(errno);
  const code: IpvsErrorCode = name === 'EEXIST' || name === 'ENOENT' || name === 'ESRCH' ? name : 'other';
  return new IpvsError(code, `IPVS ${what}: Request rejected: ${name}`);
}

/**
 * "TCP 10.96.0.10:80 -> 10.244.1.10:8080": which request a refusal answers, in its message (with
 * requests sent together, the op loop's position no longer tells).
 */
function serverName(service: VirtualService, server: RealServer): string {
  return `${virtualServerKey(service)} -> ${realServerKey(server)}`;
}

/** "add server TCP 10.96.0.10:80 -> 10.244.1.10:8080", "delete service UDP 10.96.0.10:53". */
function described(command: IpvsCommand): string {
  const what = command.op.replace('-', ' ');
  return 'server' in command
    ? `${what} ${serverName(command.service, command.server)}`
    : `${what} ${virtualServerKey(command.service)}`;
}

/**
 * How long one IPVS send may go unanswered. The kernel answers a generic-netlink request
 * synchronously, in microseconds for a command and well under a second for a dump of 30k virtual
 * servers even under TCG; no answer at all means the reply was lost (a full socket receive buffer
 * drops it) or the kernel is stuck, and waiting longer would hang the sync loop for good. 10 s is
 * far above any real answer on a loaded 2-core machine, and short against the sync period.
 */
export const IPVS_REQUEST_TIMEOUT_MS = 10_000;

export interface IpvsClientOptions {
  /** Opens the socket; a generic-netlink socket by default (tests script one). */
  readonly createSocket?: () => DatagramSocket;
  /** Bound on each send's answer; IPVS_REQUEST_TIMEOUT_MS by default. */
  readonly requestTimeoutMs?: number;
}

/** genetlink's controller (linux/genetlink.h): its family id, GET_FAMILY and attributes. */
const GENL_ID_CTRL = 0x10;
const CTRL_VERSION = 1;
const CTRL_CMD_GETFAMILY = 3;
const CTRL_ATTR_FAMILY_ID = 1;
const CTRL_ATTR_FAMILY_NAME = 2;

const COMMAND = {
  'add-service': IPVS_CMD.NEW_SERVICE,
  'edit-service': IPVS_CMD.SET_SERVICE,
  'delete-service': IPVS_CMD.DEL_SERVICE,
  'add-server': IPVS_CMD.NEW_DEST,
  'edit-server': IPVS_CMD.SET_DEST,
  'delete-server': IPVS_CMD.DEL_DEST,
} as const;

/** The answers to `datagram`; failing to send it or to get an answer, an IpvsError about `what`. */
async function answered(
  socket: NetlinkSocket,
  datagram: NetlinkDatagram,
  what: () => string,
): Promise<NetlinkAnswers> {
  try {
    return await socket.send(datagram);
  } catch (err) {
    if (err instanceof NoAnswer) throw new IpvsError('timeout', `IPVS ${what()}: ${err.message}`);
    throw new IpvsError('other', `IPVS ${what()}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export class NetlinkIpvsClient implements IpvsClient {
  readonly #socket: NetlinkSocket;
  readonly #family: number;

  private constructor(socket: NetlinkSocket, family: number) {
    this.#socket = socket;
    this.#family = family;
  }

  /** Opens a socket in the current network namespace and resolves the IPVS family. */
  static async open(options: IpvsClientOptions = {}): Promise<NetlinkIpvsClient> {
    const socket = new NetlinkSocket(
      (options.createSocket ?? openGenericNetlink)(),
      options.requestTimeoutMs ?? IPVS_REQUEST_TIMEOUT_MS,
    );
    try {
      const lookup = new NetlinkDatagram();
      lookup.message(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_VERSION);
      lookup.attributes.string(CTRL_ATTR_FAMILY_NAME, IPVS_GENL_NAME);
      const { refused, replies } = await answered(socket, lookup, () => 'family lookup');
      const errno = refused.get(0);
      if (errno !== undefined) throw new Error(`Request rejected: ${errnoName(errno)}`);
      const id = replies.map((r) => parseAttributes(r).get(CTRL_ATTR_FAMILY_ID)).find((a) => a !== undefined);
      if (id === undefined) throw new Error('no family id in the reply');
      return new NetlinkIpvsClient(socket, id.readUInt16LE());
    } catch (err) {
      socket.close();
      if (err instanceof IpvsError && err.code === 'timeout') throw err;
      const message = err instanceof Error ? err.message : String(err);
      throw new IpvsError(
        'unavailable',
        `IPVS is not available in this kernel (modprobe ip_vs?): ${message}`,
      );
    }
  }

  async listServices(): Promise<VirtualService[]> {
    const replies = await this.#one('list services', IPVS_CMD.GET_SERVICE, NLM_F_DUMP, () => {});
    return replies.map(decodeService).filter((s): s is VirtualService => s !== undefined);
  }

  async listServers(service: VirtualService): Promise<DumpedRealServer[]> {
    const replies = await this.#one('list servers', IPVS_CMD.GET_DEST, NLM_F_DUMP, (w) =>
      writeServiceIdentityMessage(w, service),
    );
    return replies.map((body) => decodeDest(service.family, body));
  }

  async send(commands: readonly IpvsCommand[]): Promise<IpvsRefusals> {
    const datagram = new NetlinkDatagram();
    const w = datagram.attributes;
    for (const command of commands) {
      datagram.message(this.#family, COMMAND[command.op], IPVS_GENL_VERSION);
      if (!('server' in command)) {
        if (command.op === 'delete-service') writeServiceIdentityMessage(w, command.service);
        else writeServiceMessage(w, command.service);
      } else if (command.op === 'delete-server') writeDestIdentityMessage(w, command.service, command.server);
      else writeDestMessage(w, command.service, command.server);
    }
    const { refused } = await answered(this.#socket, datagram, () =>
      commands.length === 1
        ? described(commands[0]!)
        : `${commands.length} commands from ${described(commands[0]!)} on`,
    );
    const refusals = new Map<number, IpvsError>();
    for (const [index, errno] of refused) refusals.set(index, refusal(described(commands[index]!), errno));
    return refusals;
  }

  async addService(service: VirtualService): Promise<void> {
    await sendOne(this, { op: 'add-service', service });
  }

  async editService(service: VirtualService): Promise<void> {
    await sendOne(this, { op: 'edit-service', service });
  }

  async deleteService(service: VirtualService): Promise<boolean> {
    try {
      await sendOne(this, { op: 'delete-service', service });
      return true;
    } catch (err) {
      if (isGone(err)) return false;
      throw err;
    }
  }

  async addServer(service: VirtualService, server: RealServer): Promise<void> {
    await sendOne(this, { op: 'add-server', service, server });
  }

  async editServer(service: VirtualService, server: RealServer): Promise<void> {
    await sendOne(this, { op: 'edit-server', service, server });
  }

  async deleteServer(service: VirtualService, server: RealServer): Promise<void> {
    await sendOne(this, { op: 'delete-server', service, server });
  }

  async setTimeouts(timeouts: IpvsTimeouts): Promise<void> {
    await this.#one('set timeouts', IPVS_CMD.SET_CONFIG, 0, (w) => writeTimeoutsMessage(w, timeouts));
  }

  close(): void {
    this.#socket.close();
  }

  /** One request of its own (a dump, a setting); the replies it got. */
  async #one(
    what: string,
    cmd: number,
    flags: number,
    write: (w: NetlinkDatagram['attributes']) => void,
  ): Promise<Buffer[]> {
    const datagram = new NetlinkDatagram();
    datagram.message(this.#family, cmd, IPVS_GENL_VERSION, flags);
    write(datagram.attributes);
    const { refused, replies } = await answered(this.#socket, datagram, () => what);
    const errno = refused.get(0);
    if (errno !== undefined) throw refusal(what, errno);
    return replies;
  }
}
