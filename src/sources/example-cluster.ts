// The bundled example cluster (examples/cluster.yaml), found from this module's location so that
// `kproxy render --example` works from any working directory and from an installed copy.
import { fileURLToPath } from 'node:url';

export const EXAMPLE_CLUSTER_PATH = fileURLToPath(new URL('../../examples/cluster.yaml', import.meta.url));
