// Whether the daemon is in contact with the API server, seen from the informers' own calls: the
// KubeApi they use is wrapped, and each list/watch outcome tells. An outage leaves the rules as
// they are (they are the last known truth) but makes /healthz report stale state after the
// health timeout, so operators and load balancers notice a node that no longer follows the
// cluster. (kube-proxy only notices changes it could not sync; kproxy also notices changes it
// cannot see.)
import type { ApiError, ApiResult, KubeApi, WatchItem } from '../kube/client.ts';
import type { Clock } from '../sync/clock.ts';

export type ContactEvent =
  | { readonly type: 'lost'; readonly at: number }
  | { readonly type: 'regained'; readonly at: number };

/** Answers that prove the server is there and working, even though the call did not succeed. */
function serverAnswered(error: ApiError): boolean {
  // 410: history expired (relist); 400/422: watch-list not supported (fall back).
  return error.kind === 'status' && [400, 410, 422].includes(error.status);
}

export function trackApiContact(
  api: KubeApi,
  clock: Clock,
  onChange: (event: ContactEvent) => void,
): KubeApi {
  let lost = false;
  const outcome = (ok: boolean) => {
    if (ok === !lost) return;
    lost = !ok;
    onChange({ type: lost ? 'lost' : 'regained', at: clock.now() });
  };
  // A call cut short by the informer stopping says nothing about the server.
  const judge = <T>(result: ApiResult<T>, signal: AbortSignal | undefined): ApiResult<T> => {
    if (!signal?.aborted) outcome(result.ok || serverAnswered(result.error));
    return result;
  };
  async function* observed(items: AsyncIterable<WatchItem>, signal: AbortSignal | undefined) {
    for await (const item of items) {
      if (item.kind === 'error' && !signal?.aborted) outcome(serverAnswered(item.error));
      yield item;
    }
  }
  return {
    list: async (resource, params, signal) => judge(await api.list(resource, params, signal), signal),
    async watch(resource, params, signal) {
      const result = judge(await api.watch(resource, params, signal), signal);
      return result.ok ? { ok: true, value: observed(result.value, signal) } : result;
    },
  };
}
