// The bundled example cluster (examples/cluster.yaml) and the configuration of its node-1, found
// from this module's location so that `kproxy render --example` works from any working directory
// and from an installed copy.
import { fileURLToPath } from 'node:url';

export const EXAMPLE_CLUSTER_PATH = fileURLToPath(new URL('../../examples/cluster.yaml', import.meta.url));
export const EXAMPLE_CONFIG_PATH = fileURLToPath(
  new URL('../../examples/kube-proxy-config.yaml', import.meta.url),
);
