import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { benchPlan, parseBenchArgs, sectionFigures } from '../../bench/bench-plan.ts';

const commandLines = (args: string[]) =>
  benchPlan(parseBenchArgs(args)).map((run) => `${run.section}: ${run.script} ${run.args.join(' ')}`);

describe('bench plan', () => {
  it('runs the curve sections at every size and for the wide Service, the others once', () => {
    assert.deepEqual(commandLines([]), [
      'model: model-speed.ts --services 30000',
      'nftables: nftables-speed.ts --services 1000 --endpoints 10',
      'nftables: nftables-speed.ts --services 10000 --endpoints 10',
      'nftables: nftables-speed.ts --services 30000 --endpoints 10',
      'nftables: nftables-speed.ts --wide --endpoints 100000',
      'nftaffinity: nftables-affinity.ts --services 3000',
      'iptables: iptables-speed.ts --services 1000 --endpoints 10',
      'iptables: iptables-speed.ts --services 10000 --endpoints 10',
      'iptables: iptables-speed.ts --services 30000 --endpoints 10',
      'iptables: iptables-speed.ts --wide --endpoints 100000',
      'kubeproxyshape: kube-proxy-shape.ts --services 10000 --endpoints 10',
      'ipvs: ipvs-speed.ts --services 1000,10000,30000 --wide-endpoints 100000',
      'informer: informer-memory.ts --services 30000',
      'daemon: daemon-memory.ts --services 30000',
      'churn: churn-latency.ts --services 10000',
      'rollout: churn-latency.ts --mode nftables --schedule rollout --services 30000 --rolling 1000 --per-second 1000 --seconds 60 --wait 10 --timeout 900',
      'rollout: churn-latency.ts --mode iptables --schedule rollout --services 30000 --rolling 1000 --per-second 1000 --seconds 60 --wait 300 --timeout 900',
    ]);
  });

  it('rolls fewer Deployments at once on a smaller cluster, each once, and keeps the figures by mode', () => {
    const options = parseBenchArgs(['--only', 'rollout', '--nft-services', '1200']);
    const runs = benchPlan(options);
    assert.deepEqual(
      runs.map((run) => run.args.slice(run.args.indexOf('--rolling'), run.args.indexOf('--seconds'))),
      [
        ['--rolling', '400', '--per-second', '400'],
        ['--rolling', '400', '--per-second', '400'],
      ],
    );
    const figures = sectionFigures(options, [
      { run: runs[0]!, figures: { mode: 'nftables', churnP99Ms: 12 } },
      { run: runs[1]!, figures: { mode: 'iptables', churnP99Ms: 2500 } },
    ]);
    assert.deepEqual(figures.rollout, {
      nftables: { mode: 'nftables', churnP99Ms: 12 },
      iptables: { mode: 'iptables', churnP99Ms: 2500 },
    });
  });

  it('--quick: every section but ipvs, the daemon and the churns, at the smallest size only, no wide Service', () => {
    assert.deepEqual(commandLines(['--quick', '--sizes', '10000,2000,30000']), [
      'model: model-speed.ts --services 2000',
      'nftables: nftables-speed.ts --services 2000 --endpoints 10',
      'nftaffinity: nftables-affinity.ts --services 2000',
      'iptables: iptables-speed.ts --services 2000 --endpoints 10',
      'kubeproxyshape: kube-proxy-shape.ts --services 2000 --endpoints 10',
      'informer: informer-memory.ts --services 2000',
    ]);
  });

  it("runs a section's main size once, as one of its points, even off the curve's sizes", () => {
    assert.deepEqual(commandLines(['--only', 'iptables', '--sizes', '1000', '--ipt-services', '5000']), [
      'iptables: iptables-speed.ts --services 1000 --endpoints 10',
      'iptables: iptables-speed.ts --services 5000 --endpoints 10',
      'iptables: iptables-speed.ts --wide --endpoints 100000',
    ]);
    assert.deepEqual(commandLines(['--only', 'nftables', '--sizes', '30000', '--wide-endpoints', '0']), [
      'nftables: nftables-speed.ts --services 30000 --endpoints 10',
    ]);
  });

  it('runs the ipvs sizes and its wide Service in one child (one VM boot)', () => {
    assert.deepEqual(commandLines(['--only', 'ipvs', '--ipvs-services', '200', '--wide-endpoints', '2000']), [
      'ipvs: ipvs-speed.ts --services 200 --wide-endpoints 2000',
    ]);
    assert.deepEqual(commandLines(['--only', 'ipvs', '--wide-endpoints', '0']), [
      'ipvs: ipvs-speed.ts --services 1000,10000,30000 --wide-endpoints 0',
    ]);
  });

  it('refuses a section or a size it does not know, rather than measuring less', () => {
    assert.throws(() => parseBenchArgs(['--only', 'nftables,iptabels']), /no such section: iptabels/);
    assert.throws(() => parseBenchArgs(['--sizes', '1000,10k']), /--sizes: not an integer ≥ 1: 10k/);
  });

  it("keeps a curve section's figures at its main size on top (the table's rows) and every run's under sizes", () => {
    const options = parseBenchArgs(['--only', 'nftables,model']);
    const [model, ...nft] = benchPlan(options);
    const figures = sectionFigures(options, [
      { run: model!, figures: { services: 30000, buildProxyStateMs: 700 } },
      { run: nft[0]!, figures: { services: 1000, wide: false, bareLoadMs: 300 } },
      { run: nft[2]!, figures: { services: 30000, wide: false, bareLoadMs: 8000 } },
      { run: nft[3]!, figures: { services: 1, wide: true, bareLoadMs: 2500 } },
    ]);
    assert.deepEqual(figures.model, { services: 30000, buildProxyStateMs: 700 });
    assert.equal(figures.nftables?.bareLoadMs, 8000);
    assert.deepEqual(
      (figures.nftables!.sizes as { services: number }[]).map((s) => s.services),
      [1000, 30000, 1],
    );
    assert.equal(figures.iptables, undefined);
  });
});
