// `kproxy trace --live` reads back what the kernel holds (nft list ruleset, iptables-save) and
// must give the same answer as the trace of the rendered rules it was loaded from.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { Lab } from '../../harness/netns.ts';
import { openNfacctCountersIn } from '../../harness/nfacct-counters.ts';
import { runRender, runTrace } from './cli-run.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces, nft and iptables';

/** The example's node-1 addresses: --live in a bare namespace cannot read them from its links. */
const NODE_ADDRESSES = ['--local', '192.168.10.11', '--local', 'fd00:192:168:10::11'];

/** Flows over the example cluster: every family of outcome the example has, both IP families. */
const FLOWS: readonly (readonly string[])[] = [
  ['--from', '10.244.1.5', '--to', '10.96.10.10:80', '--via', 'pod'],
  ['--from', '10.244.1.13', '--to', '10.96.10.10:80', '--via', 'pod'],
  ['--from', '192.168.10.11', '--to', '10.96.20.16:80', '--via', 'node'],
  ['--from', '8.8.8.8', '--to', '203.0.113.10:443', '--via', 'external'],
  ['--from', '198.51.100.7', '--to', '203.0.113.10:443', '--via', 'external'],
  ['--from', '8.8.8.8', '--to', '192.168.10.11:31444', '--via', 'external'],
  ['--from', '8.8.8.8', '--to', '192.168.10.11:30080', '--via', 'external'],
  ['--from', '10.244.1.5', '--to', '10.96.20.17:80', '--via', 'pod'],
  ['--from', '10.244.1.5', '--to', '10.96.0.10:53/udp', '--via', 'pod'],
  ['--from', '10.244.1.5', '--to', '10.96.50.10:3868/sctp', '--via', 'pod'],
  ['--from', '10.244.1.5', '--to', '10.99.99.99:80', '--via', 'pod'],
  ['--from', '[fd00:10:244:1::5]', '--to', '[fd00:10:96::11]:80', '--via', 'pod'],
];

/** Outcomes of one trace (paths differ in step text between the forms; outcomes must not). */
function outcomes(json: string): unknown {
  const report = JSON.parse(json) as {
    outcomes: { masquerade?: unknown; rule?: string }[];
    service?: string;
  };
  // Rules are quoted as each form prints them (nft lists `{ 10.96.0.0/12 }` as `10.96.0.0/12`):
  // whether a masquerade happened, and which chain rejected or dropped, is what must agree.
  return {
    service: report.service,
    outcomes: report.outcomes.map(({ masquerade, rule, ...rest }) => ({
      ...rest,
      masquerade: masquerade !== undefined,
      ...(rule !== undefined && { chain: rule.split(':')[0] }),
    })),
  };
}

/** Splits render's iptables output into its restore inputs, by their header lines (its nfacct step left out). */
function restoreInputs(rendered: string): { tool: string; input: string }[] {
  return rendered
    .split(/^(?=# ip6?tables-restore)/m)
    .filter((part) => part.startsWith('# ip'))
    .map((part) => ({
      tool: part.startsWith('# ip6') ? 'ip6tables-restore' : 'iptables-restore',
      input: part,
    }));
}

describe('kproxy trace --live', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  before(() => {
    lab = new Lab('trace-live');
  });
  after(() => lab.destroy());

  for (const mode of ['nftables', 'iptables'] as const) {
    test(`${mode}: the rules read back from the kernel trace like the rendered ones`, async () => {
      const ns = await lab.addNetns(mode);
      const rendered = await runRender(['--mode', mode, '--example']);
      assert.equal(rendered.code, 0, rendered.stderr);
      if (mode === 'nftables') await lab.exec(ns, 'nft', ['-f', '-'], { input: rendered.stdout });
      // As kproxy run at start: the rendered rules count in kube-proxy's nfacct objects.
      else assert.deepEqual(await openNfacctCountersIn(lab, ns), [{ ok: true }, { ok: true }]);
      for (const { tool, input } of restoreInputs(rendered.stdout))
        await lab.exec(ns, tool, ['--noflush'], { input });
      for (const flow of FLOWS) {
        const fromRender = await runTrace(['--mode', mode, '--example', '--json', ...flow]);
        const fromKernel = await runTrace(
          ['--mode', mode, '--live', '--json', ...NODE_ADDRESSES, ...flow],
          ns,
        );
        assert.equal(fromRender.code, 0, fromRender.stderr);
        assert.equal(fromKernel.code, 0, fromKernel.stderr);
        assert.deepEqual(outcomes(fromKernel.stdout), outcomes(fromRender.stdout), flow.join(' '));
        assert.deepEqual(
          JSON.parse(fromKernel.stdout).notEvaluated,
          [],
          `${flow.join(' ')}: all of it understood`,
        );
      }
    });
  }

  test('ipvs: the dummy link and companion table read back trace like the rendered rules', async () => {
    // This kernel has no ip_vs: `ipvsadm -Sn` is answered with render's virtual servers (the
    // format ipvsadm --restore reads and -S prints); the addresses and nft tables are the kernel's.
    const ns = await lab.addNetns('ipvs');
    const rendered = await runRender(['--mode', 'ipvs', '--example']);
    assert.equal(rendered.code, 0, rendered.stderr);
    const section = (header: RegExp) => {
      const [, body = ''] = rendered.stdout.split(header);
      return body.split(/^# /m)[0]!;
    };
    // A bridge stands in for the dummy link (the dummy module may not be loaded here): the
    // tracer reads the link's addresses, not its type.
    const links = section(/^# Addresses.*$/m).replace('type dummy', 'type bridge');
    await lab.exec(ns, 'ip', ['-batch', '-'], { input: links });
    await lab.exec(ns, 'nft', ['-f', '-'], { input: section(/^# nftables companion table.*$/m) });
    const kernel = execaRunner(['ip', 'netns', 'exec', ns]);
    const virtualServers = section(/^# IPVS virtual servers.*$/m);
    const runner: CommandRunner = {
      run: (command, args, input) =>
        command === 'ipvsadm'
          ? Promise.resolve({ stdout: virtualServers, stderr: '', exitCode: 0 })
          : kernel.run(command, args, input),
    };
    for (const flow of FLOWS) {
      const fromRender = await runTrace(['--mode', 'ipvs', '--example', '--json', ...flow]);
      const fromKernel = await runTrace(
        ['--mode', 'ipvs', '--live', '--json', ...NODE_ADDRESSES, ...flow],
        runner,
      );
      assert.equal(fromKernel.code, 0, fromKernel.stderr);
      assert.deepEqual(outcomes(fromKernel.stdout), outcomes(fromRender.stdout), flow.join(' '));
      assert.deepEqual(
        JSON.parse(fromKernel.stdout).notEvaluated,
        [],
        `${flow.join(' ')}: all of it understood`,
      );
    }
  });
});
