// The drift check's scratch table (dataplanes/shared/nft/scratch-table.ts): the render's objects
// under another name, made dormant and owned; on the kernel, it touches no packet while it lives,
// the readers of other owners' tables pass it over, and it is gone once the nft that made it is
// killed.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { DualStackState } from '../../../../contract/proxy-state.ts';
import { nftablesPlanner, planFull } from '../../../../dataplanes/nftables/planner.ts';
import { execaRunner } from '../../../../dataplanes/shared/command-runner.ts';
import { scratchTable } from '../../../../dataplanes/shared/nft/scratch-table.ts';
import { readForeignTables } from '../../../../dataplanes/shared/trace/nft-live.ts';
import { Lab, requireRoot } from '../../../../harness/netns.ts';
import { endpoint, ipv4, proxyState, servicePort } from '../../../../harness/proxy-states.ts';
import { eventually } from '../../../daemon/daemon-harness.ts';

const NAME = 'kproxy-drift-test';
const CLUSTER_IP = '10.96.0.10';

/** A Service port with endpoints, and one without (its ClusterIP rejected: kproxy's own verdict). */
const DUAL: DualStackState = {
  IPv4: proxyState('IPv4', [
    servicePort('web', { clusterIP: '10.96.0.20', clusterEndpoints: [endpoint('10.244.1.5')] }),
    servicePort('empty', { clusterIP: CLUSTER_IP }),
  ]),
  IPv6: proxyState('IPv6', [
    servicePort('web6', { clusterIP: 'fd00:96::20', clusterEndpoints: [endpoint('fd00:244::5')] }),
  ]),
};

describe('scratch table script', () => {
  test('one dormant, owned table per family, the render otherwise under the scratch name', () => {
    const { script, families } = scratchTable(planFull(DUAL).transactions(), NAME);
    assert.deepEqual(families, ['ip', 'ip6']);
    const lines = script.split('\n');
    assert.deepEqual(
      lines.filter((line) => / table /.test(line)),
      [
        `add table ip ${NAME} { flags dormant; flags owner; }`,
        `add table ip6 ${NAME} { flags dormant; flags owner; }`,
      ],
    );
    // Every other command of the render, in its order within its family, only the table renamed.
    const render = nftablesPlanner
      .inputs(planFull(DUAL))
      .map((input) => input.input)
      .join('')
      .split('\n')
      .filter((line) => line !== '' && !/^(add|delete) table /.test(line))
      .map((line) => line.replace(/^(\w+ \w+ ip6?) kproxy /, `$1 ${NAME} `));
    for (const family of families) {
      const of = (list: readonly string[]) => list.filter((line) => line.split(' ')[2] === family);
      assert.deepEqual(of(lines.slice(2, -1)), of(render), family);
    }
    assert.equal(lines.length - 3, render.length);
  });

  test('a family whose table the render deletes has no scratch table', () => {
    // A full plan without IPv6 state removes the ip6 table: add, then delete.
    const state = ipv4([...DUAL.IPv4!.servicePorts.values()]);
    assert.match(nftablesPlanner.render(planFull(state)), /^delete table ip6 kproxy$/m);
    const { script, families } = scratchTable(planFull(state).transactions(), NAME);
    assert.deepEqual(families, ['ip']);
    assert.doesNotMatch(script, / ip6 /);
  });

  test('a name outside the scratch prefix is refused (readers pass over only those)', () => {
    assert.throws(() => scratchTable(planFull(DUAL).transactions(), 'kproxy'), /kproxy-drift-\*/);
  });
});

describe('scratch table on the kernel', () => {
  test('dormant: a Service it rejects is reached while it lives, not foreign; owned: gone when its nft is killed', async (t) => {
    if (!requireRoot(t)) return;
    const lab = new Lab('scratch');
    const dir = await mkdtemp(join(tmpdir(), 'kproxy-scratch-'));
    t.after(async () => {
      await lab.destroy();
      await rm(dir, { recursive: true, force: true });
    });
    const ns = await lab.addNetns('node');
    await lab.exec(ns, 'ip', ['link', 'set', 'lo', 'up']);
    await lab.exec(ns, 'ip', ['address', 'add', `${CLUSTER_IP}/32`, 'dev', 'lo']);
    lab.spawn(ns, 'socat', [`TCP-LISTEN:80,bind=${CLUSTER_IP},fork,reuseaddr`, 'SYSTEM:echo hi']);
    const connect = async () =>
      (
        await lab.exec(ns, 'socat', ['-T', '2', '-', `TCP:${CLUSTER_IP}:80`], { reject: false })
      ).stdout.trim();
    await eventually('the listener answers on the bare node', async () => (await connect()) === 'hi');

    const state = ipv4([...DUAL.IPv4!.servicePorts.values()]);
    const file = join(dir, 'scratch.nft');
    await writeFile(file, scratchTable(planFull(state).transactions(), NAME).script);
    const nft = lab.spawn(ns, 'nft', ['-i'], { stdin: true });
    nft.send(`include "${file}"\nlist table ip ${NAME}\n`);
    await nft.waitFor('no-endpoint-services');
    assert.equal(await connect(), 'hi', 'the dormant table rejects nothing');
    // Another check's scratch table is nobody's rules to the readers of the other owners' tables.
    const foreign = await readForeignTables(execaRunner(['ip', 'netns', 'exec', ns]), 'kproxy');
    assert.deepEqual(foreign, { text: '', unreadable: [] });

    process.kill(nft.pid, 'SIGKILL');
    await nft.kill();
    assert.doesNotMatch(
      (await lab.exec(ns, 'nft', ['list', 'tables'])).stdout,
      new RegExp(NAME),
      'the kernel deleted the table with its owner',
    );

    // The same objects as kproxy's own table, on the hooks: the connection is rejected, so the
    // answer above was the dormant flag's doing, not a rule that never applied.
    await lab.exec(ns, 'nft', ['-f', '-'], { input: nftablesPlanner.render(planFull(state)) });
    assert.equal(await connect(), '', 'kproxy rejects the Service without endpoints');
  });
});
