// In-cluster configuration: the API server from KUBERNETES_SERVICE_HOST/PORT and the pod's service
// account (a projected, rotating token that is re-read rather than cached for good, and the CA).

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ConnectionResult } from './connection.ts';
import { FileTokenSource } from './token-source.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface InClusterOptions {
  readonly env: NodeJS.ProcessEnv;
  /** Where the service account is mounted; injectable for tests. */
  readonly serviceAccountDir?: string;
  /** How often the token file is re-read at most; default one minute. */
  readonly tokenMaxAgeMs?: number;
}

export async function loadInCluster(options: InClusterOptions): Promise<ConnectionResult> {
  const host = options.env.KUBERNETES_SERVICE_HOST;
  const port = options.env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    return {
      ok: false,
      error: {
        reason: 'not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set',
      },
    };
  }
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const tokenFile = join(dir, 'token');
  const caFile = join(dir, 'ca.crt');
  const tokenSource = new FileTokenSource(tokenFile, { maxAgeMs: options.tokenMaxAgeMs ?? 60_000 });
  if ((await tokenSource.token()) === undefined) {
    return { ok: false, error: { file: tokenFile, reason: 'cannot read the service account token' } };
  }
  let ca: string;
  try {
    ca = await readFile(caFile, 'utf8');
  } catch (err) {
    return {
      ok: false,
      error: { file: caFile, reason: `cannot read the cluster CA: ${(err as Error).message}` },
    };
  }
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return { ok: true, connection: { server: `https://${shownHost}:${port}`, ca, tokenSource } };
}
