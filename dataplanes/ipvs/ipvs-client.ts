// The kernel's IPVS table over generic netlink, behind a small interface (tests use a fake). The
// socket lives in the network namespace of the process that opens it.
import { createGenericNetlink, type GenericNetlinkSocket, genl } from 'netlink';
import { DataplaneError } from '../shared/dataplane-error.ts';
import {
  type DumpedRealServer,
  decodeDest,
  decodeService,
  destIdentityMessage,
  destMessage,
  IPVS_CMD,
  IPVS_GENL_NAME,
  IPVS_GENL_VERSION,
  type IpvsTimeouts,
  serviceIdentityMessage,
  serviceMessage,
  timeoutsMessage,
} from './ipvs-messages.ts';
import { type RealServer, realServerKey, type VirtualService, virtualServerKey } from './virtual-servers.ts';

export interface IpvsClient {
  listServices(): Promise<VirtualService[]>;
  listServers(service: VirtualService): Promise<DumpedRealServer[]>;
  addService(service: VirtualService): Promise<void>;
  editService(service: VirtualService): Promise<void>;
  deleteService(service: VirtualService): Promise<void>;
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

function classify(what: string, err: unknown): IpvsError {
  const message = err instanceof Error ? err.message : String(err);
  // The netlink package reports kernel refusals as "Request rejected: <errno name>".
  const errno = /Request rejected: (\w+)/.exec(message)?.[1];
  const code: IpvsErrorCode = errno === 'EEXIST' || errno === 'ENOENT' || errno === 'ESRCH' ? errno : 'other';
  return new IpvsError(code, `IPVS ${what}: ${message}`);
}

const DUMP = 0x300;

/**
 * "TCP 10.96.0.10:80 -> 10.244.1.10:8080": which request a refusal answers, in its message (with
 * requests in flight together, the op loop's position no longer tells).
 */
function serverName(service: VirtualService, server: RealServer): string {
  return `${virtualServerKey(service)} -> ${realServerKey(server)}`;
}

/**
 * How long one IPVS request may go unanswered. The kernel answers a generic-netlink request
 * synchronously, in microseconds for a command and well under a second for a dump of 30k virtual
 * servers even under TCG; no answer at all means the reply was lost (a full socket receive buffer
 * drops it) or the kernel is stuck, and waiting longer would hang the sync loop for good. 10 s is
 * far above any real answer on a loaded 2-core machine, and short against the sync period.
 */
export const IPVS_REQUEST_TIMEOUT_MS = 10_000;

/** The part of the netlink package's generic-netlink socket the client uses (tests stub it). */
export type GenlSocket = Pick<GenericNetlinkSocket, 'request' | 'ctrlRequest'> & {
  readonly socket: { close(): void };
};

export interface IpvsClientOptions {
  /** Opens the socket; the netlink package's generic-netlink socket by default. */
  readonly createSocket?: () => GenlSocket;
  /** Bound on each request's answer; IPVS_REQUEST_TIMEOUT_MS by default. */
  readonly requestTimeoutMs?: number;
}

/** `promise`, or an IpvsError 'timeout' once `ms` passed without it settling. */
async function answeredWithin<T>(what: string, ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new IpvsError('timeout', `IPVS ${what}: no answer from the kernel within ${ms} ms`)),
      ms,
    );
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

export class NetlinkIpvsClient implements IpvsClient {
  readonly #socket: GenlSocket;
  readonly #family: number;
  readonly #timeoutMs: number;

  private constructor(socket: GenlSocket, family: number, timeoutMs: number) {
    this.#socket = socket;
    this.#family = family;
    this.#timeoutMs = timeoutMs;
  }

  /** Opens a socket in the current network namespace and resolves the IPVS family. */
  static async open(options: IpvsClientOptions = {}): Promise<NetlinkIpvsClient> {
    const socket = (options.createSocket ?? createGenericNetlink)();
    const timeoutMs = options.requestTimeoutMs ?? IPVS_REQUEST_TIMEOUT_MS;
    try {
      const [reply] = await answeredWithin(
        'family lookup',
        timeoutMs,
        socket.ctrlRequest(genl.Commands.GET_FAMILY, { familyName: IPVS_GENL_NAME }),
      );
      if (reply?.familyId === undefined) throw new Error('no family id in the reply');
      return new NetlinkIpvsClient(socket, reply.familyId, timeoutMs);
    } catch (err) {
      socket.socket.close();
      if (err instanceof IpvsError) throw err;
      const message = err instanceof Error ? err.message : String(err);
      throw new IpvsError(
        'unavailable',
        `IPVS is not available in this kernel (modprobe ip_vs?): ${message}`,
      );
    }
  }

  async listServices(): Promise<VirtualService[]> {
    const replies = await this.#request('list services', IPVS_CMD.GET_SERVICE, Buffer.alloc(0), DUMP);
    return replies.map(decodeService).filter((s): s is VirtualService => s !== undefined);
  }

  async listServers(service: VirtualService): Promise<DumpedRealServer[]> {
    const replies = await this.#request(
      'list servers',
      IPVS_CMD.GET_DEST,
      serviceIdentityMessage(service),
      DUMP,
    );
    return replies.map((body) => decodeDest(service.family, body));
  }

  async addService(service: VirtualService): Promise<void> {
    await this.#request(
      `add service ${virtualServerKey(service)}`,
      IPVS_CMD.NEW_SERVICE,
      serviceMessage(service),
    );
  }

  async editService(service: VirtualService): Promise<void> {
    await this.#request(
      `edit service ${virtualServerKey(service)}`,
      IPVS_CMD.SET_SERVICE,
      serviceMessage(service),
    );
  }

  async deleteService(service: VirtualService): Promise<void> {
    await this.#request(
      `delete service ${virtualServerKey(service)}`,
      IPVS_CMD.DEL_SERVICE,
      serviceIdentityMessage(service),
    );
  }

  async addServer(service: VirtualService, server: RealServer): Promise<void> {
    await this.#request(
      `add server ${serverName(service, server)}`,
      IPVS_CMD.NEW_DEST,
      destMessage(service, server),
    );
  }

  async editServer(service: VirtualService, server: RealServer): Promise<void> {
    await this.#request(
      `edit server ${serverName(service, server)}`,
      IPVS_CMD.SET_DEST,
      destMessage(service, server),
    );
  }

  async deleteServer(service: VirtualService, server: RealServer): Promise<void> {
    await this.#request(
      `delete server ${serverName(service, server)}`,
      IPVS_CMD.DEL_DEST,
      destIdentityMessage(service, server),
    );
  }

  async setTimeouts(timeouts: IpvsTimeouts): Promise<void> {
    await this.#request('set timeouts', IPVS_CMD.SET_CONFIG, timeoutsMessage(timeouts));
  }

  close(): void {
    this.#socket.socket.close();
  }

  async #request(what: string, cmd: number, body: Buffer, flags = 0): Promise<Buffer[]> {
    // The kernel answers the socket a request came from whatever port its header names (iproute2
    // sends 0), and without one the package asks the socket for its address (getsockname) per send.
    const request = this.#socket.request(this.#family, cmd, IPVS_GENL_VERSION, body, {
      flags,
      localPort: 0,
    });
    try {
      const [replies] = await answeredWithin(what, this.#timeoutMs, request);
      return replies.map((r) => r.data);
    } catch (err) {
      if (err instanceof IpvsError) throw err;
      throw classify(what, err);
    }
  }
}
