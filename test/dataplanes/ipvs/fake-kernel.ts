// A fake IPVS netlink client and a fake `ip`/`nft`/`sysctl`/`conntrack` runner sharing one
// in-memory kernel, for unit tests of the live dataplane (the real kernel is tested in the VM).
import { type IpvsClient, IpvsError } from '../../../dataplanes/ipvs/ipvs-client.ts';
import type { DumpedRealServer, IpvsTimeouts } from '../../../dataplanes/ipvs/ipvs-messages.ts';
import {
  type RealServer,
  realServerKey,
  type VirtualService,
  virtualServerKey,
} from '../../../dataplanes/ipvs/virtual-servers.ts';
import type { CommandResult, CommandRunner } from '../../../dataplanes/shared/command-runner.ts';

interface KernelService {
  service: VirtualService;
  servers: Map<string, DumpedRealServer>;
}

export class FakeKernel {
  readonly services = new Map<string, KernelService>();
  link = false;
  readonly addresses = new Set<string>();
  readonly nftScripts: string[] = [];
  readonly tables = new Set<string>();
  /** The elements of each family's `nodeport-ips` set (the one set whose content the fake keeps). */
  readonly nodePortIps = new Map<string, Set<string>>();
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
        service(s);
        kernel.services.delete(virtualServerKey(s));
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
      run: async (command, args, input = '') => {
        const line = [command, ...args].join(' ');
        if (command === 'sysctl') {
          this.sysctls.push(...args.filter((a) => a.includes('=')));
          return ok();
        }
        if (command === 'conntrack') return ok();
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
        if (line === 'nft -f -') {
          if (this.failNextNft) {
            this.failNextNft = false;
            return fail('nft: injected failure');
          }
          this.nftScripts.push(input);
          const statements =
            /^(add|delete) (table|element) (ip6?) kproxy-ipvs(?: nodeport-ips \{ (.*) \}| .*)?$/gm;
          for (const [, verb, what, family, elements] of input.matchAll(statements)) {
            const ips = this.nodePortIps.get(family!) ?? new Set();
            this.nodePortIps.set(family!, ips);
            if (what === 'table') {
              if (verb === 'add') this.tables.add(family!);
              else this.tables.delete(family!);
              ips.clear();
            } else if (elements !== undefined) {
              for (const ip of elements.split(', ')) verb === 'add' ? ips.add(ip) : ips.delete(ip);
            }
          }
          return ok();
        }
        if (line === 'nft -c -f -') {
          // The intact check: accepted when every table it names is there (contents not modelled).
          const named = [...input.matchAll(/^\S+ \S+ (ip6?) kproxy-ipvs /gm)].map((m) => m[1]!);
          return named.every((family) => this.tables.has(family)) ? ok() : fail('No such file or directory');
        }
        if (line === 'nft list tables')
          return ok([...this.tables].map((f) => `table ${f} kproxy-ipvs\n`).join(''));
        const del = /^nft delete table (ip6?) kproxy-ipvs$/.exec(line);
        if (del) {
          this.nodePortIps.delete(del[1]!);
          return this.tables.delete(del[1]!) ? ok() : fail('No such file or directory');
        }
        const listSet = /^nft -j list set (ip6?) kproxy-ipvs nodeport-ips$/.exec(line);
        if (listSet) {
          if (!this.tables.has(listSet[1]!)) return fail('No such file or directory');
          const elem = [...(this.nodePortIps.get(listSet[1]!) ?? [])];
          return ok(
            JSON.stringify({ nftables: [{ metainfo: {} }, { set: { name: 'nodeport-ips', elem } }] }),
          );
        }
        throw new Error(`fake kernel: unexpected command ${line}`);
      },
    };
  }
}
