// The live IPVS dataplane: the only IPVS code that touches the kernel.
//
// It keeps a record of what it committed (the state, its virtual servers, the real servers
// draining at weight 0) and plans incremental syncs from it. It reads the kernel at start (to
// adopt the virtual servers an earlier run left on the dummy link's addresses), on a full sync
// (reconcile against a dump), to sweep drained real servers, and in intact()/cleanup(). An
// incremental sync the kernel refuses (dataplane-error.ts) falls back to a full one.
import { compareText } from '../../contract/base/compare-text.ts';
import { runInSlices } from '../../contract/base/work-slices.ts';
import type {
  CleanupCommand,
  DataplaneLog,
  LiveDataplane,
  SyncKind,
  SyncOutcome,
} from '../../contract/dataplane.ts';
import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';
import { checksHold, nftTableDeletion, removedObjects, runRemoval } from '../shared/cleanup-commands.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import type { ConntrackDeleter } from '../shared/conntrack/conntrack-netlink.ts';
import { deleteConntrackEntries } from '../shared/conntrack/conntrack-tool.ts';
import { UdpConntrackReconciler } from '../shared/conntrack/udp-conntrack-reconciler.ts';
import { type DrainBound, removeAfterDrain } from '../shared/ipvs-drain.ts';
import { firstOfEachSet, intactCheckScript, intactValuesScript } from '../shared/nft/intact-check-script.ts';
import {
  type NetlinkElementWriter,
  writeElementsApart,
  writeTransaction,
} from '../shared/nft/netlink-elements.ts';
import { FAMILIES as NFT_FAMILIES } from '../shared/nft/ruleset.ts';
import { COMPANION_TABLE } from './companion-ruleset.ts';
import { DrainingServers } from './draining-servers.ts';
import { boundAddresses, CommandError, changeAddresses, LINK_DELETION, linkExists } from './dummy-link.ts';
import {
  boundAddressDamage,
  RealServerTurns,
  realServerDamage,
  virtualServerDamage,
} from './intact-check.ts';
import { type IpvsClient, IpvsError } from './ipvs-client.ts';
import { diffAddresses } from './ipvs-diff.ts';
import type { IpvsTimeouts } from './ipvs-messages.ts';
import { FAMILIES, type IpvsDesired, type IpvsOp, type IpvsPlan } from './ipvs-plan.ts';
import { ipvsadmDeletion } from './ipvs-render.ts';
import { ownedVirtualServer, readCompanionRecord } from './ownership.ts';
import {
  companionDesired,
  createIpvsPlanner,
  type IpvsIncremental,
  type IpvsPlannerOptions,
  ipvsIncremental,
  type SharingIndexes,
} from './planner.ts';
import { reconcileServers, reconcileServices } from './reconcile.ts';
import { removedServerFlows } from './removed-server-flows.ts';
import { IPVS_COMMANDS_PER_SEND, IPVS_SENDS_IN_FLIGHT, runsOf, sendInWindow } from './request-window.ts';
import { SharingIndex } from './sharing-index.ts';
import {
  type RealServer,
  type VirtualServer,
  type VirtualService,
  virtualServerKey,
} from './virtual-servers.ts';

type DrainedServer = Pick<RealServer, 'address' | 'port'>;

export type IpvsLog = DataplaneLog;

export interface IpvsDataplaneOptions {
  /** Runs ip, nft, sysctl and conntrack (in the namespace the client's socket lives in). */
  readonly runner: CommandRunner;
  /** Opens the IPVS netlink client (NetlinkIpvsClient.open for the real kernel). */
  readonly openClient: () => Promise<IpvsClient>;
  /** IPVS scheduler (kube-proxy's ipvs.scheduler); rr by default. */
  readonly scheduler?: string;
  /** kube-proxy's ipvs.strictARP: answer ARP only for addresses of the receiving interface. */
  readonly strictARP?: boolean;
  /** kube-proxy's ipvs.tcpTimeout, tcpFinTimeout, udpTimeout (0 = leave as is). */
  readonly timeouts?: IpvsTimeouts;
  /** kube-proxy's ipvs.excludeCIDRs: virtual servers there are never removed. */
  readonly excludeCIDRs?: readonly string[];
  readonly log?: IpvsLog;
  /**
   * Writes the companion table's elements of incremental syncs and of a cold start as nf_tables
   * netlink batches (netlink-elements.ts), in this process's namespace; without it they go by
   * `nft -f` text. An element command makes nft 1.0.6 read the table's sets first: ~25 ms at 30k
   * services, ~400 ms in the emulated bench VM, for one hairpin element; and nft parses ~30 us per
   * element (~10x that in the VM), most of a cold start's companion table.
   */
  readonly elements?: NetlinkElementWriter;
  /** Milliseconds on a monotonic clock (performance.now); tests step it. */
  readonly now?: () => number;
  /**
   * cleanup()'s drain of the connections IPVS balances before its virtual servers go (ipvs-drain.ts):
   * its default bound, told to the log, by default.
   */
  readonly drain?: DrainBound;
  /** Deletes the conntrack entries of the connections cleanup() cut, in this dataplane's namespace. */
  readonly conntrack?: ConntrackDeleter;
}

/** kube-proxy's IPVS mode's dummy link: while it is there, kube-proxy's IPVS mode holds the node. */
const KUBE_IPVS_LINK = 'kube-ipvs0';

/**
 * Per-namespace sysctls IPVS mode needs, as kube-proxy sets them: conntrack entries for IPVS
 * connections (so nf_nat can masquerade them), forwarding, and dropping connections whose real
 * server is gone instead of blackholing them.
 */
const SYSCTLS = [
  'net.ipv4.ip_forward=1',
  'net.ipv4.vs.conntrack=1',
  'net.ipv4.vs.expire_nodest_conn=1',
  'net.ipv4.vs.expire_quiescent_template=1',
];
/** strictARP: the service addresses on the dummy link must not be announced or answered for. */
const STRICT_ARP_SYSCTLS = ['net.ipv4.conf.all.arp_ignore=1', 'net.ipv4.conf.all.arp_announce=2'];

/**
 * What the kernel holds as far as we know: the desired state of the last full sync, changed in
 * place by each incremental one (so new virtual servers come last, not in key order).
 */
interface IpvsRecord extends IpvsDesired {
  readonly virtualServers: Map<string, VirtualServer>;
  /** Sorted. */
  readonly boundAddresses: string[];
  /** Bound addresses, virtual servers and real servers: the rule-count metric. */
  objects: number;
}

function recordOf(desired: IpvsDesired): IpvsRecord {
  let objects = desired.boundAddresses.length;
  for (const vs of desired.virtualServers.values()) objects += 1 + vs.realServers.length;
  return {
    virtualServers: new Map(desired.virtualServers),
    boundAddresses: [...desired.boundAddresses],
    nodePortAddresses: desired.nodePortAddresses,
    objects,
  };
}

/** The record after an incremental plan: only what it changed is touched. */
function updateRecord(record: IpvsRecord, change: IpvsIncremental): void {
  for (const [key, vs] of change.virtualServers) {
    const old = record.virtualServers.get(key);
    if (old !== undefined) record.objects -= 1 + old.realServers.length;
    if (vs === undefined) record.virtualServers.delete(key);
    else {
      record.virtualServers.set(key, vs);
      record.objects += 1 + vs.realServers.length;
    }
  }
  const bound = record.boundAddresses;
  for (const address of change.plan.addresses.delete) {
    const at = sortedIndex(bound, address);
    if (bound[at] === address) bound.splice(at, 1);
  }
  for (const address of change.plan.addresses.add) bound.splice(sortedIndex(bound, address), 0, address);
  record.objects += change.plan.addresses.add.length - change.plan.addresses.delete.length;
}

/** What cleanup reports of the virtual servers it removes. */
function servicesRemoved(count: number): string {
  return `IPVS: ${count} virtual service(s)`;
}

/** Where `item` is or would go in the sorted `items` (binary search). */
function sortedIndex(items: readonly string[], item: string): number {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (compareText(items[mid]!, item) < 0) low = mid + 1;
    else high = mid;
  }
  return low;
}

/**
 * The sharing indexes of a state just synced in full, in slices of the event loop (215–400 ms of
 * work at 30k services x 10 on this 2-core machine at load ~6). The build is pure, so only a bug
 * fails it: the next incremental sync, which awaits the indexes, throws that bug (the sync fails
 * and the loop's retry, full, builds them again). Until then the rejection is held, not reported
 * as unhandled.
 */
function buildSharingIndexes(state: DualStackState): Promise<SharingIndexes> {
  const built = (async () => {
    const indexes: SharingIndexes = new Map();
    for (const family of FAMILIES) {
      const familyState = state[family];
      if (familyState) indexes.set(family, await runInSlices(SharingIndex.buildSteps(familyState)));
    }
    return indexes;
  })();
  built.catch(() => {});
  return built;
}

export class IpvsDataplane implements LiveDataplane {
  readonly mode = 'ipvs';
  readonly #runner: CommandRunner;
  readonly #openClient: () => Promise<IpvsClient>;
  readonly #options: IpvsPlannerOptions;
  readonly #planner: ReturnType<typeof createIpvsPlanner>;
  readonly #log: IpvsLog;
  readonly #strictARP: boolean;
  readonly #timeouts: IpvsTimeouts | undefined;
  readonly #excludeCIDRs: readonly string[];
  #client: IpvsClient | undefined;
  readonly #elements: NetlinkElementWriter | undefined;
  /** The state the kernel holds, when we are sure of it; undefined forces the next sync to be full. */
  #committed: DualStackState | undefined;
  readonly #conntrack: UdpConntrackReconciler;
  #record: IpvsRecord | undefined;
  /**
   * The sharing indexes of #committed (sharing-index.ts): built in the background after a full
   * sync or a plan of the whole states, kept up to date by each incremental one, which waits for
   * them.
   */
  #sharing: Promise<SharingIndexes> = Promise.resolve(new Map());
  /**
   * Whether a companion table of ours may be in the kernel: a full sync replaces it in one
   * transaction; without one it writes the cold start's steps (hooks-last.ts). Read at start,
   * false after cleanup, true from a full sync's first companion write on.
   */
  #companionTables = true;
  /** Keys of virtual servers we made or adopted (a full sync may delete them). */
  readonly #owned = new Set<string>();
  readonly #draining: DrainingServers;
  /** Whose real servers the next intact() lists. */
  readonly #realServerTurns = new RealServerTurns();
  /** `conntrack -D` arguments for the flows of real servers deleted in this sync. */
  #flowsOfDeleted: string[][] = [];
  readonly #drain: DrainBound;
  readonly #conntrackDeleter: ConntrackDeleter | undefined;

  constructor(options: IpvsDataplaneOptions) {
    this.#runner = options.runner;
    this.#openClient = options.openClient;
    this.#options = { scheduler: options.scheduler ?? 'rr' };
    this.#planner = createIpvsPlanner(this.#options);
    this.#log = options.log ?? (() => {});
    this.#conntrack = new UdpConntrackReconciler(options.runner, this.#log);
    this.#strictARP = options.strictARP ?? false;
    this.#timeouts = options.timeouts;
    this.#excludeCIDRs = options.excludeCIDRs ?? [];
    this.#draining = new DrainingServers(options.now ?? (() => performance.now()));
    this.#elements = options.elements;
    this.#drain = options.drain ?? { report: (line) => this.#log(line) };
    this.#conntrackDeleter = options.conntrack;
  }

  /** Real servers waiting for their connections to end (for tests and logs). */
  get draining(): number {
    return this.#draining.size;
  }

  /** Whether this dataplane holds `server` of `service` at weight 0 to drain it (drift.ts asks). */
  drains(service: Pick<VirtualService, 'protocol' | 'address' | 'port'>, server: DrainedServer): boolean {
    return this.#draining.has(service, server);
  }

  async start(): Promise<void> {
    const client = await this.#ensureClient();
    const sysctls = this.#strictARP ? [...SYSCTLS, ...STRICT_ARP_SYSCTLS] : SYSCTLS;
    const sysctl = await this.#runner.run('sysctl', ['-q', '-w', ...sysctls]);
    if (sysctl.exitCode !== 0) throw new CommandError('sysctl', sysctl.stderr);
    const t = this.#timeouts;
    if (t && (t.tcpSeconds > 0 || t.tcpFinSeconds > 0 || t.udpSeconds > 0)) await client.setTimeouts(t);
    const recorded = await readCompanionRecord(this.#runner);
    this.#companionTables = recorded.families > 0;
    const ours = new Set([...(await boundAddresses(this.#runner)), ...recorded.nodePortAddresses]);
    for (const service of await client.listServices()) {
      if (this.#isOurs(service, ours)) this.#owned.add(virtualServerKey(service));
    }
    this.#log('adopted IPVS virtual servers', { count: this.#owned.size });
  }

  async sync(
    state: DualStackState,
    kind: SyncKind,
    changed?: ReadonlySet<ServicePortKey>,
  ): Promise<SyncOutcome> {
    try {
      return await this.#sync(state, kind, changed);
    } catch (err) {
      this.#forgetUnansweringClient(err);
      throw err;
    }
  }

  async #sync(
    state: DualStackState,
    kind: SyncKind,
    changed: ReadonlySet<ServicePortKey> | undefined,
  ): Promise<SyncOutcome> {
    let client = await this.#ensureClient();
    this.#flowsOfDeleted = [];
    try {
      await this.#draining.sweep(
        client,
        (key) => this.#record?.virtualServers.get(key)?.realServers.length ?? 0,
      );
    } catch (err) {
      // A refusal is not fatal: the servers stay at weight 0 and the next sweep tries again.
      if (!(err instanceof DataplaneError)) throw err;
      this.#log('could not sweep drained IPVS real servers', { error: String(err) });
      if (this.#forgetUnansweringClient(err)) client = await this.#ensureClient();
    }
    let ran: SyncKind = 'full';
    if (kind === 'incremental' && this.#committed !== undefined && this.#record !== undefined) {
      try {
        const sharing = await this.#sharing;
        const change = ipvsIncremental(this.#committed, state, this.#options, changed, sharing);
        await this.#applyIncremental(client, change.plan);
        updateRecord(this.#record, change);
        change.commit();
        // A plan of the whole states drops the indexes: built again beside the next changes.
        if (FAMILIES.some((family) => state[family] && !sharing.has(family)))
          this.#sharing = buildSharingIndexes(state);
        ran = 'incremental';
      } catch (err) {
        // Anything but a refusal is a bug: the sync fails (the daemon reports it), and the loop's
        // retry is full.
        if (!(err instanceof DataplaneError)) throw err;
        this.#log('incremental IPVS sync failed; falling back to full', { error: String(err) });
        if (this.#forgetUnansweringClient(err)) client = await this.#ensureClient();
      }
    }
    this.#committed = undefined;
    if (ran === 'full') {
      this.#sharing = Promise.resolve(new Map());
      const plan = this.#planner.planFull(state);
      if (plan.kind !== 'full') throw new Error('expected a full IPVS plan');
      await this.#applyFull(client, plan);
      this.#record = recordOf(plan.desired);
      for (const key of this.#record.virtualServers.keys()) this.#owned.add(key);
      this.#sharing = buildSharingIndexes(state);
    }
    this.#committed = state;
    await this.#deleteFlowsOfRemovedServers();
    // UDP real servers' flows are the reconciler's alone (removedServerFlows gives none for UDP).
    const conntrack = await this.#conntrack.afterSync(state, ran, changed);
    return { kind: ran, objectCount: this.#objectCount(), conntrack };
  }

  /** SCTP flows of the real servers this sync deleted (removed-server-flows.ts). */
  async #deleteFlowsOfRemovedServers(): Promise<void> {
    for (const filter of this.#flowsOfDeleted) {
      try {
        await deleteConntrackEntries(this.#runner, filter);
      } catch (err) {
        // The rules are in place; the flows time out (expire_nodest_conn drops IPVS's side).
        if (!(err instanceof DataplaneError)) throw err;
        this.#log('could not delete the conntrack entries of a removed IPVS real server', {
          error: String(err),
        });
      }
    }
  }

  /**
   * The kernel still holds what the record says (intact-check.ts): every virtual server with its
   * settings, every bound address, and, in turns, every real server with its weight; and the
   * companion table each chain with its rules and an element of each set that should have some,
   * with its value (`nft -c`, intact-check-script.ts), which fails when it was deleted or flushed.
   */
  async intact(): Promise<boolean> {
    const record = this.#record;
    const committed = this.#committed;
    if (record === undefined || committed === undefined) return false;
    const damage = (await this.#kernelDamage(record)) ?? (await this.#companionDamage(committed));
    if (damage === undefined) return true;
    this.#log('IPVS rules changed by someone else; full sync', { damage });
    this.#committed = undefined;
    return false;
  }

  async #kernelDamage(record: IpvsDesired): Promise<string | undefined> {
    const client = await this.#ensureClient();
    const damage =
      virtualServerDamage(await client.listServices(), record) ??
      boundAddressDamage(await boundAddresses(this.#runner), record);
    if (damage !== undefined) return damage;
    for (const service of this.#realServerTurns.next(record)) {
      const listed = await client.listServers(service);
      const found = realServerDamage(service, listed, (server) => this.#draining.has(service, server));
      if (found !== undefined) return found;
    }
    return undefined;
  }

  async #companionDamage(committed: DualStackState): Promise<string | undefined> {
    const companion = companionDesired(committed, this.#options);
    const expected = NFT_FAMILIES.flatMap((f) => {
      const ruleset = companion[f];
      return ruleset ? [firstOfEachSet(ruleset)] : [];
    });
    const options = { table: COMPANION_TABLE };
    for (const script of [intactCheckScript(expected, options), intactValuesScript(expected, options)]) {
      if (script === undefined) continue;
      if ((await this.#runner.run('nft', ['-c', '-f', '-'], script)).exitCode !== 0)
        return 'the companion table lacks a chain, rule or element, or holds another value';
    }
    return undefined;
  }

  /**
   * Removes our virtual servers (ownership.ts: on the dummy link's or the recorded node-port
   * addresses, or made by us), the link and the nft tables. The virtual servers go once the
   * connections IPVS balances to them drained, at most the drain's bound, and the conntrack
   * entries of those it cut after them (ipvs-drain.ts): another mode's rules, loaded first, take
   * every new connection meanwhile, and a cut one meets them at its next packet.
   */
  async cleanup(): Promise<readonly string[]> {
    const { services, client, commands } = await this.#cleanupPlan();
    const drained = { drain: this.#drain, conntrack: this.#conntrackDeleter };
    let deleted = 0;
    const cut = await removeAfterDrain(this.#runner, services, drained, async () => {
      // Checked again: kube-proxy's IPVS mode may have started during the drain (minutes).
      const kept = await this.#leftToKubeProxy(services);
      // One gone meanwhile (kube-proxy taking the node back deletes virtual servers on node
      // addresses it does not want) is what the cleanup wants, not a failure.
      if (!kept) for (const service of services) if (await client!.deleteService(service)) deleted++;
      for (const command of commands) await runRemoval(this.#runner, command);
      return kept ? services : [];
    });
    this.#companionTables = false;
    const removed = [...(deleted > 0 ? [servicesRemoved(deleted)] : []), ...removedObjects(commands), ...cut];
    this.#owned.clear();
    this.#draining.clear();
    this.#record = undefined;
    this.#committed = undefined;
    this.#client?.close();
    this.#client = undefined;
    return removed;
  }

  async cleanupCommands(): Promise<readonly CleanupCommand[]> {
    const opened = this.#client === undefined;
    const { services, commands } = await this.#cleanupPlan();
    // A socket this read opened would keep `kproxy cleanup --script` from exiting.
    if (opened) {
      this.#client?.close();
      this.#client = undefined;
    }
    const what = servicesRemoved(services.length);
    return [...services.map((service) => ipvsadmDeletion(service, what)), ...commands];
  }

  /** Our virtual servers (and the open client that lists them), then the link's and the tables' deletions. */
  async #cleanupPlan(): Promise<{
    services: VirtualService[];
    client: IpvsClient | undefined;
    commands: CleanupCommand[];
  }> {
    // Read before the companion tables (which record the node-port addresses) go.
    const ours = await this.#recordedAddresses();
    let services: VirtualService[] = [];
    let client: IpvsClient | undefined;
    // No address of ours and no server made by this process: nothing of ours in IPVS, which is
    // then not even opened (opening it may load ip_vs).
    if (ours.size > 0 || this.#owned.size > 0) {
      client = await this.#ensureClient().catch((err: unknown) => {
        // Without ip_vs there are no virtual servers to remove; the link and tables still go.
        if (err instanceof IpvsError && err.code === 'unavailable') return undefined;
        throw err;
      });
      services = ((await client?.listServices()) ?? []).filter((s) => this.#isOurs(s, ours));
      // Also checked here, so that no drain waits for them.
      if (await this.#leftToKubeProxy(services)) services = [];
    }
    const commands: CleanupCommand[] = [];
    if (await linkExists(this.#runner)) commands.push(LINK_DELETION);
    for (const family of ['ip', 'ip6']) {
      const deletion = nftTableDeletion(family, COMPANION_TABLE);
      if (await checksHold(this.#runner, deletion.when)) commands.push(deletion);
    }
    return { services, client, commands };
  }

  /**
   * Whether `services` are kube-proxy's now (logged when so): its IPVS mode, started again, took
   * the ones it serves over in place (same address, port and protocol) and deletes the others
   * itself at its sync (its cleanLegacyService), so deleting them would cut its connections.
   */
  async #leftToKubeProxy(services: readonly VirtualService[]): Promise<boolean> {
    if (services.length === 0 || !(await linkExists(this.#runner, KUBE_IPVS_LINK))) return false;
    this.#log('IPVS virtual servers left to kube-proxy, whose kube-ipvs0 is on the node', {
      count: services.length,
    });
    return true;
  }

  /** The addresses an earlier run left its virtual servers on: the link's and the node-port ones. */
  async #recordedAddresses(): Promise<Set<string>> {
    const { nodePortAddresses } = await readCompanionRecord(this.#runner);
    return new Set([...(await boundAddresses(this.#runner)), ...nodePortAddresses]);
  }

  #isOurs(service: VirtualService, addresses: ReadonlySet<string>): boolean {
    return ownedVirtualServer(service, { addresses, keys: this.#owned, excludeCIDRs: this.#excludeCIDRs });
  }

  async #ensureClient(): Promise<IpvsClient> {
    this.#client ??= await this.#openClient();
    return this.#client;
  }

  /**
   * After a request went unanswered its reply may still come, out of step with the next ones:
   * the socket is closed and the next request opens a fresh one. True when it was.
   */
  #forgetUnansweringClient(err: unknown): boolean {
    if (!(err instanceof IpvsError && err.code === 'timeout')) return false;
    this.#client?.close();
    this.#client = undefined;
    return true;
  }

  async #applyIncremental(client: IpvsClient, plan: IpvsPlan): Promise<void> {
    if (plan.kind !== 'incremental') throw new Error('expected an incremental IPVS plan');
    await changeAddresses(this.#runner, plan.addresses.add, []);
    await this.#applyOps(client, plan.ops);
    await writeTransaction(plan.nft, this.#elements, (script) => this.#nft(script));
    await changeAddresses(this.#runner, [], plan.addresses.delete);
  }

  async #applyFull(client: IpvsClient, plan: Extract<IpvsPlan, { kind: 'full' }>): Promise<void> {
    const desired = plan.desired;
    // On an empty node this batch (link and addresses), the operations and the nft script are
    // exactly what render prints for a full plan.
    const createLink = !(await linkExists(this.#runner));
    const current = createLink ? [] : await boundAddresses(this.#runner);
    const addresses = diffAddresses(current, desired.boundAddresses);
    await changeAddresses(this.#runner, addresses.add, [], createLink);
    // Like kube-proxy (which removes every virtual server it does not want), but limited to ours.
    const ours = new Set([...current, ...desired.boundAddresses, ...desired.nodePortAddresses]);
    const { ops, existing } = reconcileServices(desired, await client.listServices(), (s) =>
      this.#isOurs(s, ours),
    );
    for (const vs of existing) ops.push(...reconcileServers(vs, await client.listServers(vs)));
    // Whatever was draining is re-decided from the dump.
    this.#draining.clear();
    await this.#applyOps(client, ops);
    await this.#writeCompanion(plan);
    await changeAddresses(this.#runner, [], addresses.delete);
  }

  /**
   * The companion tables: replaced in one transaction where one of ours may be; else the cold
   * start's steps (hooks-last.ts), the elements as netlink batches, as many as they take: the
   * table has no hook until the last step, so no packet meets it half-written (a failure leaves a
   * table without hooks, which the next full sync replaces).
   */
  async #writeCompanion(plan: Extract<IpvsPlan, { kind: 'full' }>): Promise<void> {
    if (this.#companionTables) return this.#nft(plan.nft.toString());
    this.#companionTables = true;
    const { structure, elements, hooks } = plan.coldStart;
    await this.#nft(structure.toString());
    if (!(this.#elements && (await writeElementsApart(this.#elements, elements))))
      await this.#nft(elements.toString());
    await this.#nft(hooks.toString());
  }

  /**
   * The operations, in datagrams of commands with a window of them in flight (request-window.ts).
   * A plan touches each virtual and each real server once, so what decides an op's command (the
   * draining list) is never changed by an earlier op of the same plan; each op's bookkeeping runs
   * once its own answer came. A refused op fails the sync as one at a time did, with its own
   * error (the first refused in plan order), and the ops sent with or behind it are recorded as
   * the kernel answered them (a full sync reconciles from a dump anyway).
   */
  async #applyOps(client: IpvsClient, ops: readonly IpvsOp[]): Promise<void> {
    await sendInWindow(runsOf(ops, IPVS_COMMANDS_PER_SEND), IPVS_SENDS_IN_FLIGHT, async (run) => {
      const refused = await client.send(run.map((op) => this.#draining.commandOf(op)));
      let first: IpvsError | undefined;
      for (let i = 0; i < run.length; i++) {
        const refusal = refused.get(i);
        if (refusal === undefined) this.#applied(run[i]!);
        else first ??= refusal;
      }
      if (first !== undefined) throw first;
    });
  }

  /** The bookkeeping of `op`, which the kernel did. */
  #applied(op: IpvsOp): void {
    this.#draining.applied(op);
    switch (op.op) {
      case 'add-service':
        this.#owned.add(virtualServerKey(op.service));
        break;
      case 'delete-service':
        this.#owned.delete(virtualServerKey(op.service));
        break;
      case 'delete-server':
        this.#flowsOfDeleted.push(...removedServerFlows(op.service, op.server));
    }
  }

  async #nft(script: string): Promise<void> {
    if (script === '') return;
    const result = await this.#runner.run('nft', ['-f', '-'], script);
    if (result.exitCode !== 0) throw new CommandError('nft -f', result.stderr);
  }

  #objectCount(): number {
    return this.#record?.objects ?? 0;
  }
}
