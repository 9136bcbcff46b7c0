import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { answerFollowed, type ContactEvent, trackApiContact } from '../../src/daemon/api-contact.ts';
import type { ApiError, ApiResult, KubeApi, ListPage, WatchItem } from '../../src/kube/client.ts';
import { ENDPOINT_SLICES, type ResourceType, SERVICE_CIDRS, SERVICES } from '../../src/kube/resources.ts';
import { FakeClock } from '../sync/fake-clock.ts';

const page: ApiResult<ListPage> = { ok: true, value: { resourceVersion: '1', items: [] } };
const network: ApiResult<never> = { ok: false, error: { kind: 'network', message: 'ECONNREFUSED' } };

function status(code: number, reason = 'Reason'): Extract<ApiError, { kind: 'status' }> {
  return { kind: 'status', status: code, reason, message: `answered ${code}` };
}

const failed = (error: ApiError): ApiResult<never> => ({ ok: false, error });

/** An API whose next answers, per resource, the test queues; a success once none is left. */
function scriptedApi(
  lists: Partial<Record<ResourceType['plural'], ApiResult<ListPage>[]>>,
  watchItems: WatchItem[] = [],
): KubeApi {
  return {
    list: async (resource) => lists[resource.plural]?.shift() ?? page,
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

describe('answerFollowed: which refusals still show kproxy following the server', () => {
  const cases: [string, ApiError, ResourceType, boolean, boolean][] = [
    ['410 Expired: the informer relists', status(410, 'Expired'), SERVICES, false, true],
    [
      '429 with Retry-After: the server sheds load',
      { ...status(429), retryAfterSeconds: 5 },
      SERVICES,
      false,
      true,
    ],
    ['400 to a watch-list: no watch-list on this server', status(400), SERVICES, true, true],
    ['422 to a watch-list: no watch-list on this server', status(422), SERVICES, true, true],
    ['400 to a plain list: kproxy asked wrongly, forever', status(400), SERVICES, false, false],
    ['404 for ServiceCIDRs: a server before 1.33', status(404, 'NotFound'), SERVICE_CIDRS, false, true],
    ['403 for ServiceCIDRs: RBAC from before 1.33', status(403, 'Forbidden'), SERVICE_CIDRS, false, true],
    ['404 for Services: nothing to follow', status(404, 'NotFound'), SERVICES, false, false],
    ['403 for EndpointSlices: nothing to follow', status(403, 'Forbidden'), ENDPOINT_SLICES, false, false],
    ['401: credentials refused', status(401, 'Unauthorized'), SERVICE_CIDRS, false, false],
    ['500 mid-upgrade', status(500, 'InternalError'), SERVICE_CIDRS, false, false],
    ['503 mid-upgrade', status(503, 'ServiceUnavailable'), SERVICES, false, false],
    ['504 timeout', status(504, 'Timeout'), SERVICES, false, false],
    ['connection reset', { kind: 'network', message: 'ECONNRESET' }, SERVICE_CIDRS, false, false],
    ['an unreadable answer', { kind: 'decode', message: 'not JSON' }, SERVICES, false, false],
    [
      'credentials that cannot be used',
      { kind: 'credentials', message: 'exec failed' },
      SERVICES,
      false,
      false,
    ],
  ];
  for (const [what, error, resource, watchList, followed] of cases) {
    test(`${what}: ${followed ? 'followed' : 'not followed'}`, () => {
      assert.equal(answerFollowed(error, resource, watchList), followed);
    });
  }
});

describe('trackApiContact', () => {
  test('reports losing and regaining contact once per transition, with the time and the cause', async () => {
    const clock = new FakeClock();
    const events: ContactEvent[] = [];
    const api = trackApiContact(
      scriptedApi({ services: [page, network, network, failed(status(410, 'Expired')), page] }),
      clock,
      (e) => events.push(e),
    );
    await api.list(SERVICES, params);
    const lostAt = clock.now();
    await api.list(SERVICES, params);
    await clock.advance(1000);
    await api.list(SERVICES, params);
    assert.deepEqual(events, [
      { type: 'lost', at: lostAt, resource: 'services', error: 'network: ECONNREFUSED' },
    ]);
    // 410 Expired is the server answering (the informer relists): contact is back.
    await api.list(SERVICES, params);
    assert.deepEqual(events.at(-1), { type: 'regained', at: clock.now() });
    await api.list(SERVICES, params);
    assert.equal(events.length, 2);
  });

  test('an optional resource answering 404 or 403 at every retry never loses contact', async () => {
    const events: ContactEvent[] = [];
    const refusals = Array.from({ length: 20 }, (_, i) =>
      failed(i % 2 ? status(403, 'Forbidden') : status(404, 'NotFound')),
    );
    const api = trackApiContact(scriptedApi({ servicecidrs: refusals }), new FakeClock(), (e) =>
      events.push(e),
    );
    for (let i = 0; i < 20; i++) {
      await api.list(SERVICE_CIDRS, params);
      await api.list(SERVICES, params);
    }
    assert.deepEqual(events, []);
  });

  test('a resource kproxy needs that keeps failing keeps contact lost while others succeed', async () => {
    // RBAC that no longer grants EndpointSlices: the Services calls succeeding must not hide it.
    const clock = new FakeClock();
    const events: ContactEvent[] = [];
    const forbidden = failed(status(403, 'Forbidden'));
    const api = trackApiContact(
      scriptedApi({ endpointslices: [forbidden, forbidden, forbidden] }),
      clock,
      (e) => events.push(e),
    );
    const lostAt = clock.now();
    await api.list(ENDPOINT_SLICES, params);
    for (let i = 0; i < 2; i++) {
      await clock.advance(1000);
      await api.list(SERVICES, params);
      await api.list(ENDPOINT_SLICES, params);
    }
    assert.deepEqual(
      events.map((e) => [e.type, e.at]),
      [['lost', lostAt]],
    );
    await api.list(ENDPOINT_SLICES, params);
    assert.deepEqual(
      events.map((e) => [e.type, e.at]),
      [
        ['lost', lostAt],
        ['regained', clock.now()],
      ],
    );
  });

  test('a 400 to a watch-list is followed, the same 400 to a plain watch is not', async () => {
    const events: ContactEvent[] = [];
    let answer: ApiResult<never> = failed(status(400, 'BadRequest'));
    const api = trackApiContact({ list: async () => page, watch: async () => answer }, new FakeClock(), (e) =>
      events.push(e),
    );
    await api.watch(SERVICES, { ...watchParams, sendInitialEvents: true });
    assert.equal(events.length, 0);
    await api.watch(SERVICES, { ...watchParams, resourceVersion: '5' });
    assert.deepEqual(
      events.map((e) => e.type),
      ['lost'],
    );
    answer = failed(status(410, 'Expired'));
    await api.watch(SERVICES, { ...watchParams, resourceVersion: '5' });
    assert.deepEqual(
      events.map((e) => e.type),
      ['lost', 'regained'],
    );
  });

  test('a watch stream that breaks counts as lost contact', async () => {
    const events: ContactEvent[] = [];
    const broken: WatchItem = { kind: 'error', error: { kind: 'network', message: 'socket hang up' } };
    const api = trackApiContact(scriptedApi({}, [broken]), new FakeClock(), (e) => events.push(e));
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
    const api = trackApiContact(scriptedApi({ services: [network] }), new FakeClock(), (e) => events.push(e));
    const abort = new AbortController();
    abort.abort();
    await api.list(SERVICES, params, abort.signal);
    assert.deepEqual(events, []);
  });
});
