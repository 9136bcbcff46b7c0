// A kubeconfig that points kubectl (or kproxy's --kubeconfig) at a stand-in API server, for tests
// and for users of the lab. YAML is JSON, so it is written as JSON.

import { Buffer } from 'node:buffer';

export interface StandInKubeconfigOptions {
  /** A bearer token the server accepts. kubectl sends it only over https (client-go's rule). */
  readonly token?: string;
  /** Trusted CA for an https server. */
  readonly caData?: string;
}

export function standInKubeconfig(server: string, options: StandInKubeconfigOptions = {}): string {
  const cluster: Record<string, string> = { server };
  if (options.caData !== undefined)
    cluster['certificate-authority-data'] = Buffer.from(options.caData).toString('base64');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'stand-in', cluster }],
    users: [{ name: 'stand-in', user: options.token === undefined ? {} : { token: options.token } }],
    contexts: [
      { name: 'stand-in', context: { cluster: 'stand-in', user: 'stand-in', namespace: 'default' } },
    ],
    'current-context': 'stand-in',
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}
