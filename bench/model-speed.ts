// Model section: the whole-state build (buildProxyState, what the daemon did on every sync before
// the ModelCache) and the ModelCache's first (full) and one-endpoint-change updates.
//   node --expose-gc bench/model-speed.ts [--services 30000] [--endpoints 10]
import { parseArgs } from 'node:util';
import { changedServicePorts } from '../contract/changed-service-ports.ts';
import { buildProxyState } from '../src/model/build-state.ts';
import { benchOptions, loadedModel } from './bench-model.ts';
import { median, reportSection, round, timeMs } from './measure.ts';
import { syntheticCluster, syntheticSlice } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: { services: { type: 'string', default: '30000' }, endpoints: { type: 'string', default: '10' } },
});
const services = Number(values.services);
const endpoints = Number(values.endpoints);
const cluster = syntheticCluster({ services, endpointsPerService: endpoints });

const builds: number[] = [];
for (let i = 0; i < 3; i++) {
  builds.push(
    await timeMs(() =>
      buildProxyState(
        { services: cluster.services, endpointSlices: cluster.endpointSlices, node: cluster.nodes[0] },
        benchOptions(),
      ),
    ),
  );
}

const model = loadedModel(cluster);
let state = model.update().state;
const firstUpdateMs = await timeMs(() => model.update());
const changeMs: number[] = [];
const changedMs: number[] = [];
const changed = Math.floor(services / 2);
for (let run = 0; run < 21; run++) {
  const prev = state;
  changeMs.push(
    await timeMs(() => {
      model.setEndpointSlice(syntheticSlice(changed, endpoints, 3, (run + 1) % 2));
      state = model.update().state;
    }),
  );
  // What each dataplane then pays to find the change itself (identity makes it a lookup per port).
  changedMs.push(await timeMs(() => changedServicePorts(prev.IPv4, state.IPv4)));
}

reportSection({
  services,
  endpointsPerService: endpoints,
  buildProxyStateMs: round(median(builds)),
  cacheUnchangedUpdateMs: round(firstUpdateMs, 3),
  cacheOneChangeMs: round(median(changeMs), 3),
  changedServicePortsMs: round(median(changedMs), 3),
});
