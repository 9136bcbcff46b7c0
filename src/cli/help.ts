// Usage text for `kproxy help`, `kproxy render --help` and `kproxy trace --help`.

import { COLD_START_CHUNK } from '../../dataplanes/nftables/cold-start-chunk.ts';
import { PROXY_FLAG_OPTIONS, PROXY_FLAGS } from '../config/proxy-flags.ts';
import { ROUND_BUDGET } from '../sync/sync-rounds.ts';
import { RENDER_MODES } from './planners.ts';

export const MAIN_USAGE = `kproxy: a kube-proxy replacement (nftables, iptables, IPVS)

Usage: kproxy COMMAND [flags]

Commands:
  render     print the rules for cluster objects read from files (dry run)
  trace      follow one packet through the rules: chains, matches, endpoint (see kproxy trace --help)
  diff       what this node's kernel holds against the render, per Service (see kproxy diff --help)
  run        run the node proxy daemon (see kproxy run --help)
  cleanup    remove kproxy's rules (--kube-proxy: also kube-proxy's leftovers)
  install    install kproxy, its systemd unit and /etc/kproxy/config.yaml
  help       show this help (also --help, -h)
  version    print the version

Run "kproxy render --help" for the render flags.
`;

/** One line per proxy flag, pflag's way (`-v, --v VALUE`), with its help. */
export function flagLines(names: readonly string[]): string {
  return names
    .map((name) => {
      const flag = PROXY_FLAGS[name]!;
      const left = `  ${name.length === 1 ? `-${name}, ` : ''}--${name}${flag.type === 'boolean' ? '' : ' VALUE'}`;
      return `${left.padEnd(42)} ${flag.help}`;
    })
    .join('\n');
}

const proxyFlagLines = flagLines(Object.keys(PROXY_FLAG_OPTIONS).filter((name) => name !== 'config'));

export const RENDER_USAGE = `Usage: kproxy render [--mode ${RENDER_MODES.join('|')}] (--input PATH... | --example) [flags]

Reads Services, EndpointSlices and Nodes (kubectl get services,endpointslices,nodes -A -o yaml|json,
a List, multi-document YAML, single objects, the typed lists of kubectl get --raw, or kubectl
cluster-info dump's output) and prints the ruleset this node would get: the steps \`kproxy run\`
takes on an empty node (with --since: after PATH's state), in its order, each input under a comment
line naming its tool (iptables: first the nfacct objects its rules count in, as \`nfacct add\`). Not
printed: the sysctls run sets at start. For large clusters prefer -o json: it reads many times
faster than YAML.
nftables: a full sync on a node that already has kproxy's tables rewrites them in place instead
(session affinity kept); render prints the empty-node case.

  --mode MODE                                ${RENDER_MODES.join(', ')} (same as --proxy-mode;
                                             default nftables)
  --input PATH                               file, directory (its .yaml/.yml/.json files, in
                                             subdirectories too) or - for stdin; repeatable
  --example                                  also read the bundled example cluster; without --node,
                                             render for its first node (node-1)
  --since PATH                               print the incremental update from PATH's objects instead
                                             of the full ruleset; repeatable like --input; a change
                                             over ${ROUND_BUDGET} endpoints in the rounds \`kproxy run\` applies
                                             it in, cheapest ports first, each under a # line
  --chunks                                   print the inputs apart as the live dataplane sends
                                             them, each under a # line: iptables-nft (large plans
                                             go in parts, one restore each); nftables (a cold start
                                             over ${COLD_START_CHUNK} elements goes in transactions of
                                             about that size, the canary last; kproxy run's are
                                             smaller where net.core.wmem_max is under 469 KiB);
                                             ipvs (a full sync on a node without the companion
                                             table writes it in 3 steps, the hooks last)
  --script                                   print the same steps as a POSIX shell script that
                                             feeds each input to its tool; on an empty node:
                                             kproxy render --mode MODE --example --script | sh
  --strict                                   exit 1 (and print nothing) on any warning (an object
                                             skipped); notes (kinds kproxy does not read) pass
  --family ipv4|ipv6|both                    which families to render (default both)
  --config FILE                              KubeProxyConfiguration file, read as \`kproxy run\` reads
                                             it: the flags bound to its fields are then ignored
                                             (but -v, --hostname-override, --master), with run's
                                             warnings on stderr; --mode still picks the mode

kube-proxy flags (same meanings):
${proxyFlagLines}
`;

export const TRACE_USAGE = `Usage: kproxy trace --mode nftables|iptables|ipvs (--input PATH... | --example | --live)
         --from ADDRESS[:PORT] --to ADDRESS:PORT[/tcp|udp|sctp] [--via pod|node|external] [--json]

Follows the first packet of a connection through kproxy's rules: the hooks and chains it meets,
each rule and map or set element that matches (with the Service port it serves), and where it
ends: DNAT to which endpoints with what probability, masquerade or not and why, REJECT, DROP, or
no service match; and the source and destination the endpoint sees. Rules that are not kproxy's,
or not understood, are listed as not evaluated.

  --mode MODE                                nftables, iptables or ipvs (default nftables)
  --input PATH, --example                    trace through the rules \`kproxy render\` prints for these
                                             objects (same flags as render: --config, --node-ip, ...)
  --live                                     trace through the rules this node's kernel holds now
                                             (nft tables one by one, iptables-save, ipvsadm -Sn);
                                             a table nft cannot list is named in a warning
  --from ADDRESS[:PORT]                      the packet's source (port default 40000)
  --to ADDRESS:PORT[/PROTOCOL]               its destination (protocol default tcp)
  --via pod|node|external                    where it enters: a local pod or another machine
                                             (prerouting), or this node itself (output); default
                                             node when --from is this node's address, else external
  --local ADDRESS                            also an address of this node (repeatable); the node's
                                             IPs come from --node-ip / the configuration, or the
                                             kernel with --live
  --json                                     the report as JSON
`;

export const DIFF_USAGE = `Usage: kproxy diff --mode nftables|iptables|ipvs (--input PATH... | --example | --live-api) [--json] [render's flags]

Compares what kproxy would install for these objects (the render) with what this node's kernel
holds now, per Service port: pieces missing, extra or different (a map element dropped or holding
another endpoint, a flushed chain, a rule added inside kproxy's chains). Rules of other tables
(iptables: the built-in chains' other rules) are listed as foreign and judged only by what they
do: those that drop or reject a Service's packets (traced through both) are named with the
Services they hit. Tables this nft cannot list are named as not read. Exit status: 0 equal, 1 drift, 2 error.

  --mode MODE                                nftables (default), iptables or ipvs (virtual servers,
                                             real servers and weights, kproxy-ipvs0's addresses, the
                                             companion table)
  --input PATH, --example                    the objects, as for kproxy render (--config, --node-ip, ...)
  --live-api                                 the objects listed from the cluster as kproxy run lists them
                                             (--kubeconfig, --master, --config's clientConnection; this
                                             node: --hostname-override or the hostname)
  --json                                     the report as JSON
`;
