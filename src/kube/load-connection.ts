// Where the connection comes from, following kube-proxy: with neither --kubeconfig nor --master
// (nor KUBECONFIG), the in-cluster service account; otherwise the kubeconfig files, with --master
// overriding their server address; --master alone is a plain, unauthenticated URL.

import { type ConnectionResult, withMaster } from './connection.ts';
import { loadInCluster } from './in-cluster.ts';
import { kubeconfigPaths, loadKubeconfig } from './kubeconfig.ts';

export interface LoadConnectionOptions {
  readonly kubeconfig?: string;
  readonly master?: string;
  readonly context?: string;
  readonly env: NodeJS.ProcessEnv;
  readonly serviceAccountDir?: string;
}

export async function loadConnection(options: LoadConnectionOptions): Promise<ConnectionResult> {
  const { kubeconfig, master, env } = options;
  if (!kubeconfig && !env.KUBECONFIG) {
    if (master) return { ok: true, connection: { server: master } };
    return loadInCluster({
      env,
      ...(options.serviceAccountDir ? { serviceAccountDir: options.serviceAccountDir } : {}),
    });
  }
  const loaded = await loadKubeconfig(kubeconfigPaths(kubeconfig, env), {
    requireAll: kubeconfig !== undefined,
    env,
    ...(options.context ? { context: options.context } : {}),
  });
  return loaded.ok ? { ...loaded, connection: withMaster(loaded.connection, master) } : loaded;
}
