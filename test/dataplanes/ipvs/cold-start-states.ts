// States whose companion tables the cold start tests write: the golden states, and one large
// enough for its elements to take many small datagrams.
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { endpoint, ipv4, servicePort } from '../../../harness/proxy-states.ts';
import { goldenStates } from '../nftables/golden-states.ts';

/** The golden states and 300 ClientIP services of 4 endpoints each, half with a node port. */
export const coldStartStates: Record<string, DualStackState> = {
  ...goldenStates,
  'affinity-wide': ipv4(
    Array.from({ length: 300 }, (_, i) =>
      servicePort(`sticky-${i}`, {
        clusterIP: `10.96.${i >> 8}.${i & 255}`,
        nodePort: i % 2 === 0 ? 30000 + i : 0,
        sessionAffinity: { timeoutSeconds: 60 + (i % 3) },
        clusterEndpoints: Array.from({ length: 4 }, (_, e) =>
          endpoint(`10.244.${i >> 6}.${((i & 63) << 2) + e}`),
        ),
      }),
    ),
  ),
};
