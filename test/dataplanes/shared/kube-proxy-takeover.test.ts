// Kernel test (issue 29): a node as upstream kube-proxy's iptables or nftables mode leaves it, taken
// over by kproxy's iptables and nftables modes with no failed connection, and handed back the same
// way. kube-proxy's rules are its own: upstream's proxier tests' expected dumps, and beside them
// rules written from upstream's proxiers for what no dump holds, loaded as kube-proxy-rule-sets.ts
// says (fixtures/kube-proxy/SOURCES.md: which upstream function writes each written line).
// The steps are the README's ("Migration from kube-proxy and rollback"). Each kube-proxy rule set is
// probed where it gives a Service that answers here: the overall dumps' ClusterIP (ns1/svc1) and
// NodePort with externalTrafficPolicy Cluster (ns3/svc3), one connection held to ns4/svc4 (two
// endpoints); in iptables mode a second run with the overall dump's ns1/svc1 as the eTP Local dump
// gives it (iptablesOverallWithEtpLocal: its ClusterIP of two endpoints, its NodePort with
// externalTrafficPolicy Local, one connection held to that NodePort too); in every rule set a UDP ClusterIP
// (kube-system/kube-dns:dns, two endpoints, written), probed and two flows held (a source port
// each: every answer must come from the flow's first backend); and in nftables mode a NodePort with
// externalTrafficPolicy Local and a local endpoint (ns7/svc7, written), probed and held. A Local
// NodePort may be answered only by its local endpoint, seeing the client's own address.
import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import type { DualStackState, ServicePort } from '../../../contract/proxy-state.ts';
import { buildIptablesDataplane } from '../../../dataplanes/iptables/build.ts';
import { buildNftablesDataplane } from '../../../dataplanes/nftables/build.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import type { EchoReply } from '../../../harness/echo-server.ts';
import { allowance } from '../../../harness/emulation.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { ipv4 } from '../../../harness/proxy-states.ts';
import { type Probe, probeUntilStopped } from '../../../harness/steady-probes.ts';
import { ANSWER_TIMEOUT_MS, Topology } from '../../../harness/topology.ts';
import { cleanupCommand } from '../../../src/cli/cleanup.ts';
import {
  ensureNfacct,
  fixture,
  iptablesOverallWithEtpLocal,
  KUBE_DNS_UDP,
  LOCAL_POD,
  NFACCT,
  NFT_LOCAL_NODE_PORT,
  OVERALL,
  OVERALL_ETP_LOCAL,
  POD_CIDRS,
  startIptablesKubeProxy,
  startNftablesKubeProxy,
  type Target,
  together,
} from './kube-proxy-rule-sets.ts';

/** The probing pace: one connection per target every 40 ms, 25 a second (the issue asks 20+). */
const PROBE_EVERY_MS = 40;
/** How long each step's before and after is probed: 12 connections per target at that pace. */
const PHASE_MS = 500;

/** As `kproxy run` sets them where the kernel has kube-proxy's nfacct objects (it does here). */
function fixtureNode(ports: ServicePort[]): DualStackState {
  return ipv4(ports, {
    localDetector: { mode: 'ClusterCIDR', cidrs: [POD_CIDRS[1]] },
    localhostNodePorts: true,
    localhostNodePortsCounted: true,
    invalidDropsCounted: true,
  });
}

/**
 * A probe's answer timeout: ANSWER_TIMEOUT_MS, made for the design load, stretched on a busier host
 * (harness/emulation.ts): at load ~48 on 2 cores one run in seven saw ~100 attempts to each target
 * time out at once with the bare 5 s, the others none.
 */
const ANSWER_MS = allowance(ANSWER_TIMEOUT_MS);

/** The client's probes to `targets` at the test's pace until stop(). */
function probing(t: TestContext, topology: Topology, targets: readonly Target[]) {
  return probeUntilStopped(t, topology, targets, { everyMs: PROBE_EVERY_MS, answerMs: ANSWER_MS });
}

/**
 * What went wrong: failed connections, and answers to a Local-policy target from another pod than
 * LOCAL_POD or that did not see the client's own address (masqueraded).
 */
function failures(probes: readonly Pick<Probe<Target>, 'target' | 'outcome'>[], clientIP: string): string[] {
  return probes
    .filter(
      ({ target, outcome: o }) =>
        'error' in o || (target.localOnly && (o.name !== LOCAL_POD || !o.peer.startsWith(`${clientIP}:`))),
    )
    .map(({ target, outcome }) => `${target.name}: ${JSON.stringify(outcome)}`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const KUBE_PROXY_MODES = {
  iptables: {
    start: startIptablesKubeProxy,
    /** What of kube-proxy's the takeover removed, and what it may leave to kproxy's iptables mode. */
    removed: /iptables-nft filter: 7 kube-proxy chain/,
    holdsItsRules: (saved: string) =>
      saved.includes('-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'),
  },
  nftables: {
    start: startNftablesKubeProxy,
    removed: /nft table ip kube-proxy/,
    holdsItsRules: (_saved: string, tables: string) => tables.includes('table ip kube-proxy'),
  },
};

const IPTABLES_UDP = [fixture('iptables-udp-clusterip.restore')];
/**
 * Each upstream dump taken over, with the rules written beside it: its mode, and the Services that
 * answer here.
 */
const RULE_SETS = [
  {
    tag: 'ipt',
    name: 'iptables-overall.restore',
    mode: 'iptables',
    dump: fixture('iptables-overall.restore'),
    besides: IPTABLES_UDP,
    services: together(OVERALL, KUBE_DNS_UDP),
  },
  {
    // All four kinds in one run: the overall Services with ns1/svc1 as the eTP Local dump's.
    tag: 'iptl',
    name: "iptables-overall.restore, ns1/svc1 iptables-etp-local.restore's",
    mode: 'iptables',
    dump: await iptablesOverallWithEtpLocal(),
    besides: IPTABLES_UDP,
    services: together(OVERALL_ETP_LOCAL, KUBE_DNS_UDP),
  },
  {
    tag: 'nft',
    name: 'nftables-overall.nft',
    mode: 'nftables',
    dump: fixture('nftables-overall.nft'),
    besides: [fixture('nftables-udp-etp-local.nft')],
    services: together(OVERALL, KUBE_DNS_UDP, NFT_LOCAL_NODE_PORT),
  },
] as const;

/** What a held UDP flow heard: every answer's backend (one per tick). */
function udpBackends(output: string): string[] {
  return output
    .split('\n')
    .slice(0, -1)
    .map((line) => {
      const reply = JSON.parse(line) as EchoReply | { error: string };
      return 'name' in reply ? reply.name : `error: ${reply.error}`;
    });
}

for (const ruleSet of RULE_SETS) {
  for (const to of ['iptables', 'nftables'] as const) {
    const kubeProxy = KUBE_PROXY_MODES[ruleSet.mode];
    const { services } = ruleSet;
    describe(`kube-proxy (${ruleSet.mode} mode, ${ruleSet.name}) → kproxy ${to} → kube-proxy`, () => {
      test('no connection fails, held ones keep their backend, each owner is left alone', async (t) => {
        if (!requireRoot(t)) return;
        const lab = new Lab(`kptake-${ruleSet.tag}-${to.slice(0, 3)}`);
        t.after(() => lab.destroy());
        const topology = await Topology.create(lab, { podsPerNode: [2] });
        const node = topology.nodes[0]!;
        const clientIP = topology.client.ipv4;
        for (const pod of node.pods) await topology.startEcho(pod, { tcp: [80], udp: [53] });
        await lab.addRoute(topology.client.ns, ['172.30.0.0/16', 'via', node.ipv4]);
        const runner = execaRunner(['ip', 'netns', 'exec', node.ns]);
        const saved = async () => (await lab.exec(node.ns, 'iptables-nft-save', [])).stdout;
        const tables = async () => (await lab.exec(node.ns, 'nft', ['list', 'tables'])).stdout;
        const nfacct = async () => (await lab.exec(node.ns, 'nfacct', ['list'])).stdout;
        /** `kproxy cleanup ARGS` in the node namespace: what it printed. */
        const cleanup = async (args: string[]) => {
          let stdout = '';
          let stderr = '';
          const io = {
            stdout: { write: (text: string) => (stdout += text) },
            stderr: { write: (text: string) => (stderr += text) },
            stdin: (async function* () {})(),
          };
          assert.equal(await cleanupCommand(args, io, runner), 0, stderr);
          return stdout;
        };
        // Not kube-proxy's: must outlive the takeover (an admin's chain and its jump).
        await lab.exec(node.ns, 'iptables-nft', ['-t', 'filter', '-N', 'SITE-INPUT']);
        await lab.exec(node.ns, 'iptables-nft', ['-t', 'filter', '-A', 'INPUT', '-j', 'SITE-INPUT']);

        await kubeProxy.start(lab, node.ns, node.ipv4, ruleSet.dump, ruleSet.besides);
        const held = await Promise.all(
          services.held(node.ipv4).map(async (target) => {
            const proc = await topology.holdConnection(
              topology.client.ns,
              target.host,
              target.port,
              target.proto,
            );
            const greeting = JSON.parse(proc.output().split('\n')[0]!) as EchoReply;
            return { target, proc, greeting };
          }),
        );
        for (const { target, greeting } of held) {
          if (target.localOnly) assert.deepEqual(failures([{ target, outcome: greeting }], clientIP), []);
        }
        /** Each held connection still echoes: its ticks went on since `before` (lines per connection). */
        const ticks = () => held.map(({ proc }) => proc.output().split('\n').length);
        const stillEchoing = async (why: string) => {
          const before = ticks();
          await sleep(PHASE_MS);
          for (const [i, { target, proc, greeting }] of held.entries()) {
            assert.ok(proc.output().split('\n').length > before[i]!, `${target.name}: ${why}`);
            assert.doesNotMatch(proc.output(), /error/, `${target.name} (to ${greeting.name})`);
            // A TCP connection that echoes is still with its backend; a UDP flow's every answer says.
            if (target.proto === 'udp') {
              assert.deepEqual(new Set(udpBackends(proc.output())), new Set([greeting.name]), target.name);
            }
          }
        };
        const probed = services.probed(node.ipv4);

        // Takeover: kproxy's first sync, then kube-proxy's leftovers go. Each phase lasts
        // PHASE_MS, so that connections are probed before, between and after the steps.
        let stop = probing(t, topology, probed);
        await sleep(PHASE_MS);
        const log = () => {};
        // kproxy run's iptables mode makes kube-proxy's nfacct objects at start where missing.
        if (to === 'iptables') await ensureNfacct(lab, node.ns);
        const dataplane =
          to === 'iptables'
            ? buildIptablesDataplane({ runner, log })
            : buildNftablesDataplane({ runner, log });
        await dataplane.start();
        assert.equal((await dataplane.sync(fixtureNode(services.ports()), 'full')).kind, 'full');
        await sleep(PHASE_MS);
        // The README's step: with kproxy running, its other mode named, so that only kube-proxy's go.
        const removed = await cleanup([
          '--mode',
          to === 'iptables' ? 'nftables' : 'iptables',
          '--kube-proxy',
        ]);
        await sleep(PHASE_MS);
        let { probes } = await stop();
        assert.deepEqual(failures(probes, clientIP), [], 'no connection fails across the takeover');
        // At the pace, across the three phases at least (the steps between them add more).
        for (const target of probed) {
          const attempts = probes.filter((probe) => probe.target === target).length;
          assert.ok(attempts >= Math.floor((3 * PHASE_MS) / PROBE_EVERY_MS), `${target.name}: ${attempts}`);
        }

        assert.match(removed, kubeProxy.removed);
        const afterTakeover = await saved();
        assert.ok(
          !/KUBE-/.test(afterTakeover) && !/kube-proxy/.test(await tables()),
          `${afterTakeover}\n${await tables()}`,
        );
        assert.match(afterTakeover, /-A INPUT -j SITE-INPUT/, "what is not kube-proxy's stays");
        if (to === 'nftables') {
          assert.equal(await nfacct(), '', "kube-proxy's nfacct objects go");
          assert.doesNotMatch(afterTakeover, /KPROXY/);
          assert.match(await tables(), /table ip kproxy/);
        } else {
          // kproxy's iptables mode counts in the same objects: they stay, in use.
          for (const name of NFACCT) assert.match(await nfacct(), new RegExp(` = ${name};`));
          assert.match(afterTakeover, /KPROXY-/);
        }
        await stillEchoing('echoes after the takeover');

        // The way back: kube-proxy starts (its full restore or transaction), then `kproxy cleanup`.
        stop = probing(t, topology, probed);
        await sleep(PHASE_MS);
        await kubeProxy.start(lab, node.ns, node.ipv4, ruleSet.dump, ruleSet.besides);
        await sleep(PHASE_MS);
        await cleanup(['--mode', to]);
        await sleep(PHASE_MS);
        ({ probes } = await stop());
        assert.deepEqual(failures(probes, clientIP), [], 'no connection fails on the way back');
        const afterRollback = await saved();
        assert.doesNotMatch(afterRollback, /KPROXY/);
        assert.doesNotMatch(await tables(), /kproxy/);
        assert.ok(kubeProxy.holdsItsRules(afterRollback, await tables()));
        assert.match(afterRollback, /-A INPUT -j SITE-INPUT/);
        await stillEchoing('echoes after the way back');
      });
    });
  }
}
