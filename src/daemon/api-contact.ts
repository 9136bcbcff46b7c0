// Whether the daemon follows the API server, seen from the informers' own calls: the KubeApi they
// use is wrapped, and each list/watch outcome tells. An outage leaves the rules as they are (they
// are the last known truth) but makes /healthz report stale state after the health timeout, so
// operators and load balancers notice a node that no longer follows the cluster. This is kproxy's
// addition: kube-proxy's health has no API rule at all (only a queued change left unsynced), so
// the rule counts only what truly stops kproxy from following the cluster.
//
// The rule, per resource (its latest call counts):
// - followed: a success; 410 (history expired: the informer relists); 400/422 to a watch-list (a
//   server without watch-list: the informer lists and watches); 429 (the server is there and sheds
//   load, saying when to come back: failing every node's probes, or restarting daemons that then
//   relist, only adds to it); 404 or 403 for an optional resource (ServiceCIDRs: not served
//   before 1.33, or not granted by an older RBAC role; the informer takes it as empty, and
//   kube-proxy runs without it too).
// - not followed: no answer (refused, reset, timed out, half-open), an answer that cannot be read,
//   credentials that cannot be used, 401, 403 or 404 for a resource kproxy needs, any other 4xx,
//   and 5xx (a server mid-upgrade or without its storage serves nothing).
// Contact is lost at the first call not followed, and stays lost while any resource's latest call
// was not followed; it is regained when every resource's latest call was followed.

import type { Clock } from '../../contract/base/clock.ts';
import {
  type ApiError,
  type ApiResult,
  formatApiError,
  type KubeApi,
  type WatchItem,
} from '../kube/client.ts';
import type { ResourceType } from '../kube/resources.ts';

export type ContactEvent =
  /** `resource` and `error`: the call that lost contact. */
  | { readonly type: 'lost'; readonly at: number; readonly resource: string; readonly error: string }
  | { readonly type: 'regained'; readonly at: number };

/** Whether a failed call still shows kproxy following the server (the rule above). */
export function answerFollowed(error: ApiError, resource: ResourceType, watchList: boolean): boolean {
  if (error.kind !== 'status') return false;
  const { status } = error;
  if (status === 410 || status === 429) return true;
  if (watchList && (status === 400 || status === 422)) return true;
  return resource.optional !== undefined && (status === 403 || status === 404);
}

export function trackApiContact(
  api: KubeApi,
  clock: Clock,
  onChange: (event: ContactEvent) => void,
): KubeApi {
  /** Resources whose latest call was not followed. */
  const failing = new Set<string>();
  const outcome = (resource: ResourceType, error: ApiError | undefined, watchList: boolean) => {
    const wasLost = failing.size > 0;
    if (error === undefined || answerFollowed(error, resource, watchList)) failing.delete(resource.plural);
    else failing.add(resource.plural);
    if (!wasLost && failing.size > 0 && error) {
      onChange({ type: 'lost', at: clock.now(), resource: resource.plural, error: formatApiError(error) });
    } else if (wasLost && failing.size === 0) {
      onChange({ type: 'regained', at: clock.now() });
    }
  };
  // A call cut short by the informer stopping says nothing about the server.
  const judge = <T>(
    resource: ResourceType,
    result: ApiResult<T>,
    signal: AbortSignal | undefined,
    watchList = false,
  ): ApiResult<T> => {
    if (!signal?.aborted) outcome(resource, result.ok ? undefined : result.error, watchList);
    return result;
  };
  async function* observed(
    resource: ResourceType,
    items: AsyncIterable<WatchItem>,
    signal: AbortSignal | undefined,
  ) {
    for await (const item of items) {
      if (item.kind === 'error' && !signal?.aborted) outcome(resource, item.error, false);
      yield item;
    }
  }
  return {
    list: async (resource, params, signal) =>
      judge(resource, await api.list(resource, params, signal), signal),
    async watch(resource, params, signal) {
      const result = judge(
        resource,
        await api.watch(resource, params, signal),
        signal,
        params.sendInitialEvents === true,
      );
      return result.ok ? { ok: true, value: observed(resource, result.value, signal) } : result;
    },
  };
}
