// What `kproxy render --mode ipvs` prints is what the live dataplane sends, byte for byte and in
// order: the dummy link and its addresses (`ip -batch` input), the virtual server operations (the
// netlink requests, written as the ipvsadm lines render prints), the companion table (`nft -f`
// input) and the addresses removed last. Full syncs on an empty node (the companion table in the
// three steps render --chunks prints, its elements by nft or as netlink batches), a full sync on a
// node holding the table (one transaction, as render prints it), and incremental syncs.
// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/ipvs/live-render.test.ts --name 'render'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import type { IpvsClient } from '../../../dataplanes/ipvs/ipvs-client.ts';
import type { IpvsOp } from '../../../dataplanes/ipvs/ipvs-plan.ts';
import { ipvsadmLine } from '../../../dataplanes/ipvs/ipvs-render.ts';
import { IpvsDataplane, type IpvsDataplaneOptions } from '../../../dataplanes/ipvs/live.ts';
import { ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { type CommandRunner, scriptText } from '../../../dataplanes/shared/command-runner.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { goldenStates } from '../nftables/golden-states.ts';
import { randomState } from '../nftables/random-state.ts';
import { FakeKernel } from './fake-kernel.ts';
import { recordingElementWriter, scriptElements, sentElements } from './recording-elements.ts';

interface Sent {
  /** The tool a section of render output names: ip -batch, ipvsadm --restore or nft -f. */
  readonly tool: string;
  readonly text: string;
}

/** Render output as its non-empty sections. */
function renderedSections(rendered: string): Sent[] {
  return rendered
    .split(/^(?=# )/m)
    .map((section) => {
      const newline = section.indexOf('\n');
      const tool = /; ([^;]+)\)$/.exec(section.slice(0, newline))?.[1];
      if (tool === undefined) throw new Error(`no tool named in ${section.slice(0, newline)}`);
      return { tool, text: section.slice(newline + 1) };
    })
    .filter(({ text }) => text !== '');
}

/**
 * A fake node whose writes are recorded as render would print them (consecutive IPVS operations as
 * one section); with `elements`, the companion elements the dataplane writes by netlink go there.
 */
function recordingNode(
  kernel = new FakeKernel(),
  elements?: IpvsDataplaneOptions['elements'],
): { kernel: FakeKernel; dataplane: IpvsDataplane; sent: Sent[] } {
  const sent: Sent[] = [];
  const runner = kernel.runner();
  const recording: CommandRunner = {
    run: (command, args, pieces = '') => {
      const input = scriptText(pieces);
      const line = [command, ...args].join(' ');
      if (line === 'ip -batch -') sent.push({ tool: 'ip -batch', text: input });
      else if (line === 'nft -f -') sent.push({ tool: 'nft -f', text: input });
      else if (command === 'ip' && !['show', 'del'].some((verb) => args.includes(verb)))
        throw new Error(`ip outside a batch: ${line}`);
      return runner.run(command, args, input);
    },
  };
  const record = (op: IpvsOp) => {
    const last = sent.at(-1);
    if (last?.tool === 'ipvsadm --restore')
      sent.push({ tool: last.tool, text: `${sent.pop()!.text}${ipvsadmLine(op)}\n` });
    else sent.push({ tool: 'ipvsadm --restore', text: `${ipvsadmLine(op)}\n` });
  };
  const client = kernel.client();
  const recordingClient: IpvsClient = {
    ...client,
    async addService(service) {
      record({ op: 'add-service', service });
      await client.addService(service);
    },
    async editService(service) {
      record({ op: 'edit-service', service });
      await client.editService(service);
    },
    async deleteService(service) {
      record({ op: 'delete-service', service });
      return client.deleteService(service);
    },
    async addServer(service, server) {
      record({ op: 'add-server', service, server });
      await client.addServer(service, server);
    },
    async editServer(service, server) {
      record({ op: 'edit-server', service, server });
      await client.editServer(service, server);
    },
    async deleteServer(service, server) {
      record({ op: 'delete-server', service, server });
      await client.deleteServer(service, server);
    },
  };
  const dataplane = new IpvsDataplane({
    runner: recording,
    openClient: async () => recordingClient,
    elements,
  });
  return { kernel, dataplane, sent };
}

/** Golden states, and ten random ones per seed. */
function fullStates(seeds: readonly number[]): [string, DualStackState][] {
  return [
    ...Object.entries(goldenStates),
    ...seeds.flatMap((seed) => {
      const random = prng(seed);
      return Array.from({ length: 10 }, (_, i): [string, DualStackState] => [
        `seed ${seed}, random ${i}`,
        randomState(random),
      ]);
    }),
  ];
}

/** The companion table's cold-start step of render --chunks that holds the elements. */
const ELEMENTS_STEP = /^nftables companion table \(full, step 2\/3: /;

test('render --chunks of a full plan is what a full sync on an empty node sends', async () => {
  for (const [name, state] of fullStates(testSeeds({ first: 3 }))) {
    const { dataplane, sent } = recordingNode();
    await dataplane.start();
    await dataplane.sync(state, 'full');
    assert.deepEqual(sent, renderedSections(ipvsPlanner.renderChunks!(ipvsPlanner.planFull(state))), name);
  }
});

test('with the element writer, the cold start elements go as netlink batches that encode the step render --chunks prints', async () => {
  const seeds = testSeeds({ first: 5 });
  process.stdout.write(seedsLine('ipvs cold start elements by netlink ≡ render --chunks', seeds));
  let split = 0;
  for (const [name, state] of fullStates(seeds)) {
    // Small datagrams, so that a few dozen elements take several.
    const { writer, datagrams } = recordingElementWriter(2048);
    const { dataplane, sent } = recordingNode(new FakeKernel(), writer);
    await dataplane.start();
    await dataplane.sync(state, 'full');
    const rendered = ipvsPlanner.renderChunks!(ipvsPlanner.planFull(state));
    const step = rendered.split(/^(?=# )/m).find((section) => ELEMENTS_STEP.test(section.slice(2)));
    assert.ok(step !== undefined, `${name}: no elements step in ${rendered}`);
    const elements = step.slice(step.indexOf('\n') + 1);
    assert.deepEqual(
      sent,
      renderedSections(rendered).filter((section) => section.text !== elements),
      `${name}: the other steps as render --chunks prints them`,
    );
    assert.deepEqual(sentElements(datagrams), scriptElements(elements), `${name}: the elements`);
    assert.ok(
      datagrams.every((datagram) => datagram.length <= 2048),
      name,
    );
    if (datagrams.length > 1) split++;
  }
  assert.ok(split > 0, 'some cold start took several datagrams');
});

test('a full sync on a node holding the companion table replaces it in one transaction, as render prints it', async () => {
  for (const [name, state] of fullStates(testSeeds({ first: 3 }))) {
    const first = recordingNode();
    await first.dataplane.start();
    await first.dataplane.sync(state, 'full');
    const companion = renderedSections(ipvsPlanner.render(ipvsPlanner.planFull(state))).filter(
      (section) => section.tool === 'nft -f',
    );
    // The same dataplane's next full sync, and a restarted one's first (it finds the table).
    first.sent.length = 0;
    await first.dataplane.sync(state, 'full');
    assert.deepEqual(first.sent, companion, `${name}: the next full sync`);
    const restarted = recordingNode(first.kernel);
    await restarted.dataplane.start();
    await restarted.dataplane.sync(state, 'full');
    assert.deepEqual(restarted.sent, companion, `${name}: a restarted dataplane's first`);
  }
});

test('render --since is what each incremental sync sends', async () => {
  const seeds = testSeeds();
  process.stdout.write(seedsLine('ipvs render ≡ live', seeds));
  for (const seed of seeds) {
    const random = prng(seed);
    const { dataplane, sent } = recordingNode();
    await dataplane.start();
    let state = randomState(random);
    await dataplane.sync(state, 'full');
    // 40 steps, more while fewer than 10 were compared: a third of the steps follow a drain, and 40
    // compared fewer than 10 for ~1e-5 of seeds (extrapolated: over 4,000 seeds 10 took at most 32
    // steps, the tail shrinking ~0.6x per step past 20), so 80 leaves ~1e-11.
    let compared = 0;
    let step = 0;
    for (; step < 40 || (compared < 10 && step < 80); step++) {
      const next = randomState(random);
      // Real servers still draining are swept (deleted once idle) or revived (weight back) by the
      // live dataplane, from what the kernel says about their connections: no plan knows that.
      const draining = dataplane.draining > 0;
      sent.length = 0;
      assert.equal(
        (await dataplane.sync(next, 'incremental')).kind,
        'incremental',
        `seed ${seed}, step ${step}`,
      );
      if (!draining) {
        assert.deepEqual(
          sent,
          renderedSections(ipvsPlanner.render(ipvsPlanner.planIncremental(state, next))),
          `seed ${seed}, step ${step}`,
        );
        compared++;
      }
      state = next;
    }
    assert.ok(compared >= 10, `seed ${seed}: only ${compared} of ${step} steps compared`);
  }
});
