// Shared pieces of the daemon tests: a config from YAML text, a dataplane that records what it is
// asked to do, and polling for a condition (no timed assertions: only a generous upper bound).
import { setTimeout as sleep } from 'node:timers/promises';
import type { CleanupCommand, LiveDataplane, SyncKind, SyncOutcome } from '../../contract/dataplane.ts';
import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { allowance } from '../../harness/emulation.ts';
import { loadProxyConfig, type ProxyConfig } from '../../src/config/config.ts';

export async function configFromYaml(yaml: string, flags: Record<string, string> = {}): Promise<ProxyConfig> {
  const loaded = await loadProxyConfig(
    { config: 'test-config.yaml', ...flags },
    { readFile: async () => yaml, hostname: 'test-host' },
  );
  if (!loaded.ok) throw new Error(`test config rejected: ${loaded.error}`);
  return loaded.config;
}

/** Fast periods so that syncs, retries and the health timeout happen within a test. */
export const FAST_CONFIG = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: node-1
healthzBindAddress: 127.0.0.1:0
metricsBindAddress: 127.0.0.1:0
nftables:
  syncPeriod: 500ms
  minSyncPeriod: 50ms
`;

export interface RecordedSync {
  readonly kind: SyncKind;
  readonly state: DualStackState;
}

export class RecordingDataplane implements LiveDataplane {
  readonly mode = 'nftables' as const;
  readonly syncs: RecordedSync[] = [];
  starts = 0;
  cleanups = 0;
  failNext = 0;
  /** What each of the failNext syncs throws: the kernel's refusal, unless a test injects a bug. */
  failure: Error = new DataplaneError('injected dataplane failure');
  intactAnswer = true;

  async start(): Promise<void> {
    this.starts++;
  }

  async sync(state: DualStackState, kind: SyncKind): Promise<SyncOutcome> {
    if (this.failNext > 0) {
      this.failNext--;
      throw this.failure;
    }
    this.syncs.push({ kind, state });
    return { kind, objectCount: state.IPv4?.servicePorts.size ?? 0, conntrack: [] };
  }

  async intact(): Promise<boolean> {
    return this.intactAnswer;
  }

  async cleanup(): Promise<readonly string[]> {
    this.cleanups++;
    return [];
  }

  async cleanupCommands(): Promise<readonly CleanupCommand[]> {
    return [];
  }

  get last(): RecordedSync | undefined {
    return this.syncs.at(-1);
  }
}

/**
 * Polls until `check` returns true; throws with `what` after `timeoutMs`. The default bounds a hang
 * only: what the tests wait for (a sync after minSyncPeriod, the health timeout of 2 × syncPeriod,
 * an informer retry) takes at most a few seconds even on a loaded machine (stretched in the VM).
 */
export async function eventually(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = allowance(15_000),
) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(20);
  }
}
