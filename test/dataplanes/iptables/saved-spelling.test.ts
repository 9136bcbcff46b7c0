// savedSpelling without a kernel: rules of kproxy's shapes and the line iptables-save 1.8.9 listed for
// each once restored (nft and legacy alike; saved-spelling-kernel.test.ts restores every shape).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { IPFamily } from '../../../contract/base/ip-family.ts';
import { savedSpelling } from '../../../dataplanes/iptables/saved-spelling.ts';
import { splitArguments } from '../../../dataplanes/iptables/trace-ruleset.ts';

const SAVED: readonly (readonly [IPFamily, string, string])[] = [
  // Addresses, interfaces and protocol first, with their masks; matches in order; comments quoted.
  [
    'IPv4',
    '-m comment --comment "ns1/sticky:80/TCP cluster IP" -m tcp -p tcp -d 10.96.0.60 --dport 80 ! -s 10.244.0.0/16 -j KPROXY-MARK-MASQ',
    '! -s 10.244.0.0/16 -d 10.96.0.60/32 -p tcp -m comment --comment "ns1/sticky:80/TCP cluster IP" -m tcp --dport 80 -j KPROXY-MARK-MASQ',
  ],
  [
    'IPv4',
    '-m comment --comment "pod traffic for ns1/etp:80/TCP external destinations" -i cali+ -j KPROXY-SVC-X',
    '-i cali+ -m comment --comment "pod traffic for ns1/etp:80/TCP external destinations" -j KPROXY-SVC-X',
  ],
  // A mask that is not a prefix stays an address; a /0 goes.
  [
    'IPv4',
    '-m comment --comment "service IPs by their low 5 bits" -d 0.0.0.28/0.0.0.31 -j KPROXY-SVB-1-1C',
    '-d 0.0.0.28/0.0.0.31 -m comment --comment "service IPs by their low 5 bits" -j KPROXY-SVB-1-1C',
  ],
  [
    'IPv6',
    '-m comment --comment "e/open:80/TCP loadbalancer IP" -s ::/0 -j KPROXY-EXT-X',
    '-m comment --comment "e/open:80/TCP loadbalancer IP" -j KPROXY-EXT-X',
  ],
  // inet_ntop writes an address after six zero groups dotted.
  ['IPv6', '-s ::1:2 -j KPROXY-MARK-MASQ', '-s ::0.1.0.2/128 -j KPROXY-MARK-MASQ'],
  [
    'IPv6',
    '-m comment --comment x -m recent --name KPROXY-TEP-A --set -m tcp -p tcp -j DNAT --to-destination [::1:2]:8080',
    '-p tcp -m comment --comment "x" -m recent --set --name KPROXY-TEP-A --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource -m tcp -j DNAT --to-destination [::0.1.0.2]:8080',
  ],
  [
    'IPv4',
    '-m comment --comment x -m recent --name KPROXY-TEP-A --rcheck --seconds 10800 --reap -j KPROXY-TEP-A',
    '-m comment --comment "x" -m recent --rcheck --seconds 10800 --reap --name KPROXY-TEP-A --mask 255.255.255.255 --rsource -j KPROXY-TEP-A',
  ],
  // lround(p × 2³¹) / 2³¹ with %.11f, an exact half rounded to even.
  [
    'IPv4',
    '-m statistic --mode random --probability 0.3333333333 -j X',
    '-m statistic --mode random --probability 0.33333333349 -j X',
  ],
  [
    'IPv4',
    '-m statistic --mode random --probability 0.0002441406 -j X',
    '-m statistic --mode random --probability 0.00024414062 -j X',
  ],
  ['IPv4', '-j MARK --or-mark 0x4000', '-j MARK --set-xmark 0x4000/0x4000'],
  ['IPv4', '-j MARK --xor-mark 0x4000', '-j MARK --set-xmark 0x4000/0x0'],
  [
    'IPv4',
    '-m comment --comment x -m tcp -p tcp -d 127.0.0.0/8 --dport 30080 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j X',
    '-d 127.0.0.0/8 -p tcp -m comment --comment "x" -m tcp --dport 30080 -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j X',
  ],
  [
    'IPv6',
    '-m comment --comment "x has no endpoints" -m udp -p udp -d fd00:96::78 --dport 53 -j REJECT',
    '-d fd00:96::78/128 -p udp -m comment --comment "x has no endpoints" -m udp --dport 53 -j REJECT --reject-with icmp6-port-unreachable',
  ],
  [
    'IPv4',
    '-m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
    '! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
  ],
];

test('rules of the render, spelled as iptables-save listed them', () => {
  for (const [family, rendered, saved] of SAVED)
    assert.deepEqual(savedSpelling(family, splitArguments(rendered)), splitArguments(saved), rendered);
});

test('a module, option or target this spelling was not taught is refused, not guessed', () => {
  for (const rule of [
    '-m limit --limit 5/s -j ACCEPT',
    '-m tcp -p tcp --syn -j DROP',
    '-j SNAT --to-source 1.2.3.4',
  ])
    assert.throws(() => savedSpelling('IPv4', splitArguments(rule)), /no iptables-save spelling known/, rule);
});
