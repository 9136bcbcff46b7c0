// The synthetic cluster fed to the model the way the daemon feeds it (object by object), and the
// options of a node of that cluster. Shared by the benchmark sections.
import { ModelCache } from '../src/model/model-cache.ts';
import type { ProxyOptions } from '../src/model/node-settings.ts';
import type { SyntheticCluster } from './synthetic-cluster.ts';

export const BENCH_NODE_IP = '10.200.0.1';

export function benchOptions(): ProxyOptions {
  return {
    nodeName: 'node-0',
    nodeIPs: [BENCH_NODE_IP],
    detectLocalMode: 'ClusterCIDR',
    clusterCIDRs: ['10.244.0.0/16'],
    masqueradeAll: false,
    masqueradeBit: 14,
    nodePortAddresses: [],
  };
}

export function loadedModel(cluster: SyntheticCluster): ModelCache {
  const model = new ModelCache(benchOptions());
  for (const service of cluster.services) model.setService(service);
  for (const slice of cluster.endpointSlices) model.setEndpointSlice(slice);
  model.setNode(cluster.nodes[0]);
  return model;
}
