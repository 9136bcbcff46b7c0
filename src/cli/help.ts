// Usage text for `kproxy help` and `kproxy render --help`.
import { RENDER_MODES } from './planners.ts';
import { PROXY_FLAGS } from './proxy-flags.ts';

export const MAIN_USAGE = `kproxy: a kube-proxy replacement (nftables, iptables, IPVS)

Usage: kproxy COMMAND [flags]

Commands:
  render     print the rules for cluster objects read from files (dry run)
  run        run the node proxy daemon (see kproxy run --help)
  cleanup    remove kproxy's rules (--kube-proxy: also kube-proxy's leftovers)
  install    install kproxy, its systemd unit and /etc/kproxy/config.yaml
  help       show this help (also --help, -h)
  version    print the version

Run "kproxy render --help" for the render flags.
`;

const proxyFlagLines = Object.entries(PROXY_FLAGS)
  .map(([name, flag]) => {
    const left = `  --${name}${flag.type === 'boolean' ? '' : ' VALUE'}`;
    return `${left.padEnd(42)} ${flag.help}`;
  })
  .join('\n');

export const RENDER_USAGE = `Usage: kproxy render [--mode ${RENDER_MODES.join('|')}] (--input PATH... | --example) [flags]

Reads Services, EndpointSlices and Nodes (kubectl get services,endpointslices,nodes -A -o yaml|json,
a List, multi-document YAML or single objects) and prints the ruleset this node would get: the
inputs \`kproxy run\` sends on an empty node (with --since: after PATH's state), each under a
comment line naming its tool. For large clusters prefer -o json: it reads many times faster than YAML.

  --mode MODE                                ${RENDER_MODES.join(', ')} (same as --proxy-mode;
                                             default nftables)
  --input PATH                               file, directory (its .yaml/.yml/.json files) or - for stdin;
                                             repeatable
  --example                                  also read the bundled example cluster; without --node,
                                             render for its first node (node-1)
  --since PATH                               print the incremental update from PATH's objects instead
                                             of the full ruleset; repeatable like --input
  --chunks                                   iptables: print the inputs as iptables-nft gets them
                                             (large plans go in parts, one restore each)
  --strict                                   exit 1 (and print nothing) when any object was skipped
  --family ipv4|ipv6|both                    which families to render (default both)
  --config FILE                              KubeProxyConfiguration file; flags override it

kube-proxy flags (same meanings):
${proxyFlagLines}
`;
