import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type ContactEvent, trackApiContact } from '../../src/daemon/api-contact.ts';
import type { ApiResult, KubeApi, ListPage, WatchItem } from '../../src/kube/client.ts';
import { SERVICES } from '../../src/kube/resources.ts';
import { FakeClock } from '../sync/fake-clock.ts';

const page: ApiResult<ListPage> = { ok: true, value: { resourceVersion: '1', items: [] } };
const network: ApiResult<never> = { ok: false, error: { kind: 'network', message: 'ECONNREFUSED' } };
const expired: ApiResult<never> = {
  ok: false,
  error: { kind: 'status', status: 410, reason: 'Expired', message: 'too old' },
};

/** An API whose next answers the test queues. */
function scriptedApi(lists: ApiResult<ListPage>[], watchItems: WatchItem[] = []): KubeApi {
  return {
    list: async () => lists.shift() ?? page,
    watch: async () => ({
      ok: true,
      value: (async function* () {
        yield* watchItems;
      })(),
    }),
  };
}

const params = { limit: 500 };
const watchParams = { timeoutSeconds: 300, allowWatchBookmarks: true };

describe('trackApiContact', () => {
  test('reports losing and regaining contact once per transition, with the time', async () => {
    const clock = new FakeClock();
    const events: ContactEvent[] = [];
    const api = trackApiContact(scriptedApi([page, network, network, expired, page]), clock, (e) =>
      events.push(e),
    );
    await api.list(SERVICES, params);
    const lostAt = clock.now();
    await api.list(SERVICES, params);
    await clock.advance(1000);
    await api.list(SERVICES, params);
    assert.deepEqual(events, [{ type: 'lost', at: lostAt }]);
    // 410 Expired is the server answering (the informer relists): contact is back.
    await api.list(SERVICES, params);
    assert.deepEqual(events.at(-1), { type: 'regained', at: clock.now() });
    await api.list(SERVICES, params);
    assert.equal(events.length, 2);
  });

  test('a watch stream that breaks counts as lost contact', async () => {
    const events: ContactEvent[] = [];
    const broken: WatchItem = { kind: 'error', error: { kind: 'network', message: 'socket hang up' } };
    const api = trackApiContact(scriptedApi([], [broken]), new FakeClock(), (e) => events.push(e));
    const watch = await api.watch(SERVICES, watchParams);
    assert.ok(watch.ok);
    for await (const _ of watch.value) {
      // drain
    }
    assert.deepEqual(
      events.map((e) => e.type),
      ['lost'],
    );
  });

  test('calls cut short by stopping the informers are not an outage', async () => {
    const events: ContactEvent[] = [];
    const api = trackApiContact(scriptedApi([network]), new FakeClock(), (e) => events.push(e));
    const abort = new AbortController();
    abort.abort();
    await api.list(SERVICES, params, abort.signal);
    assert.deepEqual(events, []);
  });
});
