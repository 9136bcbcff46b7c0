// Rules that are not kproxy's, or that the tracer does not understand, are named in the report
// and never guessed at: the trace goes on as if they did not match.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { TracePacket } from '../../dataplanes/shared/trace/packet.ts';
import { traceRuleText } from '../../src/cli/trace.ts';
import { runRender } from './cli-run.ts';

const HOST = { localAddresses: ['192.168.10.11'] };
const FROM_POD: TracePacket = {
  source: '10.244.1.5',
  sourcePort: 40000,
  destination: '10.96.10.10',
  port: 80,
  protocol: 'tcp',
  via: 'pod',
};
const WEB_ENDPOINTS = ['10.244.1.13:8080', '10.244.2.14:8080', '10.244.3.15:8080'];

function endpoints(report: ReturnType<typeof traceRuleText>): string[] {
  return report.branches
    .map((branch) => (branch.outcome.kind === 'dnat' ? branch.outcome.endpoint : branch.outcome.kind))
    .sort();
}

describe('what the tracer does not evaluate', () => {
  test("nftables: another program's table and an unknown rule in kproxy's are listed, not applied", async () => {
    const rendered = (await runRender(['--mode', 'nftables', '--example'])).stdout;
    const foreign = [
      'add table inet firewall',
      'add chain inet firewall input { type filter hook prerouting priority 0 ; policy drop ; }',
      'add rule inet firewall input tcp dport 80 drop',
      'insert rule ip kproxy nat-prerouting meta iifname "eth9" counter',
    ].join('\n');
    const report = traceRuleText('nftables', `${rendered}\n${foreign}\n`, FROM_POD, HOST);
    assert.deepEqual(
      endpoints(report),
      WEB_ENDPOINTS,
      'the foreign drop and the unknown rule change nothing',
    );
    assert.ok(
      report.notEvaluated.some((entry) =>
        entry.startsWith("inet firewall input (prerouting): not kproxy's table"),
      ),
    );
    assert.ok(report.notEvaluated.some((entry) => entry.includes('meta iifname "eth9" counter')));
    const unknownStep = report.branches[0]!.steps.find((step) => step.kind === 'unknown');
    assert.equal(unknownStep?.chain, 'nat-prerouting');
  });

  test("iptables: another program's jump in a built-in chain is listed, its chain not entered", async () => {
    const rendered = (await runRender(['--mode', 'iptables', '--example'])).stdout;
    const foreign = [
      '*nat',
      ':DOCKER - [0:0]',
      '-A DOCKER -j DNAT --to-destination 1.1.1.1:1',
      '-I PREROUTING 1 -j DOCKER',
      'COMMIT',
    ];
    // Inserted before render's own IPv6 section: the foreign lines are IPv4 rules.
    const [v4, v6] = rendered.split(/^(?=# ip6tables-restore)/m);
    const report = traceRuleText('iptables', `${v4}${foreign.join('\n')}\n${v6}`, FROM_POD, HOST);
    assert.deepEqual(endpoints(report), WEB_ENDPOINTS);
    assert.ok(
      report.notEvaluated.some((entry) => entry.includes("-A PREROUTING -j DOCKER (not kproxy's rule)")),
    );
  });

  test("iptables: render's nfacct step makes objects, not rules: nothing of it is listed", async () => {
    const rendered = (await runRender(['--mode', 'iptables', '--example'])).stdout;
    assert.match(rendered, /^nfacct add /m);
    const report = traceRuleText('iptables', rendered, FROM_POD, HOST);
    assert.deepEqual(endpoints(report), WEB_ENDPOINTS);
    assert.deepEqual(report.notEvaluated, []);
  });

  test('iptables: a match the tracer does not know makes the rule unknown, not matching', () => {
    const text = [
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      ':KPROXY-SERVICES - [0:0]',
      '-A PREROUTING -j KPROXY-SERVICES',
      '-A KPROXY-SERVICES -m physdev --physdev-in eth0 -j DNAT --to-destination 10.0.0.9:80',
      'COMMIT',
    ].join('\n');
    const report = traceRuleText('iptables', text, FROM_POD, HOST);
    assert.equal(report.branches.length, 1);
    assert.equal(report.branches[0]!.outcome.kind, 'no-service');
    assert.ok(
      report.notEvaluated.some(
        (entry) => entry.includes('--physdev-in eth0') && entry.includes('not understood'),
      ),
    );
  });
});
