// kproxy's nftables path as the daemon runs it (`kproxy run` writes set and map elements by
// netlink batches), measured by bench/nftables-netlink.ts in a child started inside a namespace:
// the writer's socket lives in the namespace of the process that opens it. The nftables section
// (its curve points) and the kubeproxyshape section (kproxy beside kube-proxy's rulesets) both take
// their daemon-path figures from here.
import { fileURLToPath } from 'node:url';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import type { ClusterShape } from './synthetic-cluster.ts';

/** Past 10k services the cold start and the changes outlast the daemon's tool timeout. */
const CHILD_TIMEOUT_MS = 30 * 60_000;

/**
 * The child's figures (see its reportSection) for `shape` in namespace `ns`: the cold start with
 * the writer, then `changes` endpoint changes (0: none, and no change figures). The bare `nft -f`
 * is the caller's to measure (--skip-bare): both callers have done it, or do not need it.
 */
export async function nftablesNetlinkFigures(
  ns: string,
  shape: ClusterShape,
  changes: number,
): Promise<Record<string, number>> {
  const child = fileURLToPath(new URL('./nftables-netlink.ts', import.meta.url));
  const args = [
    ...(shape.wide ? ['--wide'] : ['--services', String(shape.services)]),
    '--endpoints',
    String(shape.endpointsPerService),
    '--changes',
    String(changes),
    '--skip-bare',
  ];
  const { stdout, stderr, exitCode } = await execaRunner(['nsenter', `--net=/run/netns/${ns}`], {
    timeoutMs: () => CHILD_TIMEOUT_MS,
  }).run(process.execPath, [child, ...args]);
  const line = stdout.split('\n').find((l) => l.startsWith('BENCH-RESULT '));
  if (!line) throw new Error(`nftables-netlink.ts printed no result (exit ${exitCode}): ${stdout}${stderr}`);
  return JSON.parse(line.slice('BENCH-RESULT '.length)) as Record<string, number>;
}
