// A fake IPVS netlink client and a fake `ip`/`nft`/`sysctl`/`conntrack` runner sharing one
// in-memory kernel, for unit tests of the live dataplane (the real kernel is tested in the VM).
// The companion table lives in the fake nft (fake-nft.ts: the scripts kproxy sends, applied
// through the tracer's parser), so the tracer follows a packet through what the dataplane left
// (traceRuleset(): the virtual servers as `ipvsadm -Sn` lines and the bound addresses, read by
// the tracer's parser, and the companion's ruleset).

import { compareText } from '../../../contract/base/compare-text.ts';
import { COMPANION_TABLE } from '../../../dataplanes/ipvs/companion-ruleset.ts';
import { type IpvsClient, IpvsError } from '../../../dataplanes/ipvs/ipvs-client.ts';
import type { DumpedRealServer, IpvsTimeouts } from '../../../dataplanes/ipvs/ipvs-messages.ts';
import { DUMMY_LINK } from '../../../dataplanes/ipvs/ipvs-plan.ts';
import { ipvsadmLine } from '../../../dataplanes/ipvs/ipvs-render.ts';
import { type IpvsRuleset, parseIpvsRuleset } from '../../../dataplanes/ipvs/trace.ts';
import {
  type RealServer,
  realServerKey,
  type VirtualService,
  virtualServerKey,
} from '../../../dataplanes/ipvs/virtual-servers.ts';
import { NftError } from '../../../dataplanes/nftables/nft-error.ts';
import {
  type CommandResult,
  type CommandRunner,
  scriptText,
} from '../../../dataplanes/shared/command-runner.ts';
import { FakeNft } from '../nftables/fake-nft.ts';

interface KernelService {
  service: VirtualService;
  servers: Map<string, DumpedRealServer>;
}

const MISSING = 'Error: No such file or directory';

export class FakeKernel {
  readonly services = new Map<string, KernelService>();
  link = false;
  /** kube-proxy's IPVS mode's link, there when a test says. */
  kubeIpvsLink = false;
  /** /proc/net/ip_vs_conn's entries (its header added), as a test sets them. */
  connections: string[] = [];
  readonly addresses = new Set<string>();
  /** The companion tables. */
  readonly nft = new FakeNft();
  timeouts: IpvsTimeouts | undefined;
  readonly sysctls: string[] = [];
  /** Makes the next `nft -f` fail (to exercise the fallback to a full sync). */
  failNextNft = false;

  /** ipvsadm -S style lines, sorted. */
  ipvs(): string[] {
    const lines: string[] = [];
    for (const { service, servers } of this.services.values()) {
      lines.push(`${virtualServerKey(service)} ${service.scheduler} p=${service.persistenceTimeout}`);
      for (const rs of servers.values())
        lines.push(`${virtualServerKey(service)} -> ${realServerKey(rs)} w=${rs.weight}`);
    }
    return lines.sort();
  }

  /** The families that hold a companion table. */
  get tables(): string[] {
    return [...this.nft.ruleset.tables.values()]
      .filter((t) => t.name === COMPANION_TABLE)
      .map((t) => t.family);
  }

  /**
   * What the tracer reads: the bound addresses and `ipvsadm -Sn` (servers in key order, as render
   * lists them: the kernel's own order only orders the trace's branches), beside the companion's
   * ruleset.
   */
  traceRuleset(): IpvsRuleset {
    const lines = ['# Addresses', ...[...this.addresses].map((a) => `address add ${a} dev ${DUMMY_LINK}`)];
    lines.push('# IPVS virtual servers');
    for (const { service, servers } of this.services.values()) {
      lines.push(ipvsadmLine({ op: 'add-service', service }));
      for (const [, server] of [...servers].sort(([a], [b]) => compareText(a, b)))
        lines.push(ipvsadmLine({ op: 'add-server', service, server }));
    }
    return { ...parseIpvsRuleset(lines.join('\n')), companion: this.nft.ruleset };
  }

  setConnections(service: string, server: string, active: number, inactive: number): void {
    const rs = this.#service(service).servers.get(server);
    if (!rs) throw new Error(`no ${server} in ${service}`);
    this.#service(service).servers.set(server, {
      ...rs,
      activeConnections: active,
      inactiveConnections: inactive,
    });
  }

  #service(key: string): KernelService {
    const s = this.services.get(key);
    if (!s) throw new IpvsError('ENOENT', `no service ${key}`);
    return s;
  }

  client(): IpvsClient {
    const kernel = this;
    const service = (s: VirtualService) => kernel.#service(virtualServerKey(s));
    const dumped = (rs: RealServer): DumpedRealServer => ({
      ...rs,
      activeConnections: 0,
      inactiveConnections: 0,
    });
    let sends = Promise.resolve();
    return {
      async listServices() {
        return [...kernel.services.values()].map((s) => s.service);
      },
      async listServers(s) {
        return [...service(s).servers.values()];
      },
      async addService(s) {
        if (kernel.services.has(virtualServerKey(s))) throw new IpvsError('EEXIST', 'exists');
        kernel.services.set(virtualServerKey(s), { service: s, servers: new Map() });
      },
      async editService(s) {
        service(s).service = s;
      },
      async deleteService(s) {
        // As NetlinkIpvsClient: the kernel's refusal of a service that is not there reads as gone.
        return kernel.services.delete(virtualServerKey(s));
      },
      async addServer(s, rs) {
        const servers = service(s).servers;
        if (servers.has(realServerKey(rs))) throw new IpvsError('EEXIST', 'exists');
        servers.set(realServerKey(rs), dumped(rs));
      },
      async editServer(s, rs) {
        const servers = service(s).servers;
        const old = servers.get(realServerKey(rs));
        if (!old) throw new IpvsError('ENOENT', 'no server');
        servers.set(realServerKey(rs), { ...old, weight: rs.weight });
      },
      async deleteServer(s, rs) {
        if (!service(s).servers.delete(realServerKey(rs))) throw new IpvsError('ENOENT', 'no server');
      },
      // One command at a time through the methods above (a wrapper overriding them sees each), a
      // send only once the one before it is done, as the kernel reads a socket's datagrams.
      send(commands) {
        const done = sends.then(async () => {
          const refused = new Map<number, IpvsError>();
          for (const [index, c] of commands.entries()) {
            try {
              switch (c.op) {
                case 'add-service':
                  await this.addService(c.service);
                  break;
                case 'edit-service':
                  await this.editService(c.service);
                  break;
                case 'delete-service':
                  // A command sent is refused when the service is not there.
                  service(c.service);
                  await this.deleteService(c.service);
                  break;
                case 'add-server':
                  await this.addServer(c.service, c.server);
                  break;
                case 'edit-server':
                  await this.editServer(c.service, c.server);
                  break;
                case 'delete-server':
                  await this.deleteServer(c.service, c.server);
              }
            } catch (err) {
              if (!(err instanceof IpvsError)) throw err;
              refused.set(index, err);
            }
          }
          return refused;
        });
        sends = done.then(
          () => {},
          () => {},
        );
        return done;
      },
      async setTimeouts(timeouts) {
        kernel.timeouts = timeouts;
      },
      close() {},
    };
  }

  runner(): CommandRunner {
    const ok = (stdout = ''): CommandResult => ({ stdout, stderr: '', exitCode: 0 });
    const fail = (stderr: string): CommandResult => ({ stdout: '', stderr, exitCode: 1 });
    return {
      run: async (command, args, pieces = '') => {
        const input = scriptText(pieces);
        const line = [command, ...args].join(' ');
        if (command === 'sysctl') {
          this.sysctls.push(...args.filter((a) => a.includes('=')));
          return ok();
        }
        if (command === 'conntrack') return ok();
        if (line === 'ip link show dev kube-ipvs0') return this.kubeIpvsLink ? ok() : fail('does not exist');
        if (line === 'cat /proc/net/ip_vs_conn') {
          const header = 'Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData';
          return ok([header, ...this.connections].map((l) => `${l}\n`).join(''));
        }
        if (line === 'ip link show dev kproxy-ipvs0') return this.link ? ok() : fail('does not exist');
        if (line === 'ip link add kproxy-ipvs0 type dummy') {
          this.link = true;
          return ok();
        }
        if (line === 'ip link del kproxy-ipvs0') {
          this.link = false;
          this.addresses.clear();
          return ok();
        }
        if (line === 'ip -j address show dev kproxy-ipvs0') {
          return ok(
            JSON.stringify([{ addr_info: [...this.addresses].map((local) => ({ local, scope: 'global' })) }]),
          );
        }
        if (line === 'ip -batch -') {
          for (const l of input.split('\n').filter(Boolean)) {
            if (l === 'link add kproxy-ipvs0 type dummy') {
              if (this.link) return fail('RTNETLINK answers: File exists');
              this.link = true;
              continue;
            }
            if (!this.link) return fail(`Cannot find device "kproxy-ipvs0"`);
            const [, verb, cidr] = l.split(' ');
            const address = cidr!.split('/')[0]!;
            if (verb === 'add') this.addresses.add(address);
            else this.addresses.delete(address);
          }
          return ok();
        }
        const nft = async (script: string): Promise<CommandResult> => {
          try {
            await this.nft.run(script);
            return ok();
          } catch (error) {
            if (error instanceof NftError) return fail(error.message);
            throw error;
          }
        };
        if (line === 'nft -f -') {
          if (this.failNextNft) {
            this.failNextNft = false;
            return fail('nft: injected failure');
          }
          return nft(input);
        }
        if (line === 'nft -c -f -') return (await this.nft.check(input)) ? ok() : fail(MISSING);
        if (line === 'nft list tables')
          return ok(this.tables.map((f) => `table ${f} ${COMPANION_TABLE}\n`).join(''));
        const del = /^nft delete table (ip6?) kproxy-ipvs$/.exec(line);
        if (del) return nft(`delete table ${del[1]} ${COMPANION_TABLE}\n`);
        const listSet = /^nft -j list set (ip6?) kproxy-ipvs (\S+)$/.exec(line);
        if (listSet) {
          const set = this.nft.ruleset.tables.get(`${listSet[1]} ${COMPANION_TABLE}`)?.sets.get(listSet[2]!);
          if (!set) return fail(MISSING);
          const elem = set.elements.map((e) => e.key.join(' . '));
          return ok(JSON.stringify({ nftables: [{ metainfo: {} }, { set: { name: set.name, elem } }] }));
        }
        throw new Error(`fake kernel: unexpected command ${line}`);
      },
    };
  }
}
