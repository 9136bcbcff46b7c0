import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import { build, endpoint, service, slice } from '../model/fixtures.ts';

const web = service('web');
const api = service('api', { clusterIP: '10.96.0.11' });
const webSlice = slice('web', [endpoint('10.244.1.1')]);

function changed(before: Parameters<typeof build>[0], after: Parameters<typeof build>[0]): string[] {
  return [...changedServicePorts(build(before).state.IPv4, build(after).state.IPv4)].sort();
}

describe('changedServicePorts', () => {
  it('is empty for identical states built separately', () => {
    assert.deepEqual(changed([web, api, webSlice], [web, api, webSlice]), []);
  });

  it('lists an added and a removed service port', () => {
    assert.deepEqual(changed([web], [api]), ['default/api:80/TCP', 'default/web:80/TCP']);
  });

  it('lists a service port whose endpoints changed, and only that one', () => {
    const moved = slice('web', [endpoint('10.244.1.2')]);
    assert.deepEqual(changed([web, api, webSlice], [web, api, moved]), ['default/web:80/TCP']);
  });

  it('lists a service port whose endpoint only changed readiness', () => {
    const notReady = slice('web', [endpoint('10.244.1.1', { ready: false })]);
    assert.deepEqual(changed([web, webSlice], [web, notReady]), ['default/web:80/TCP']);
  });

  it('lists a service port whose service fields changed', () => {
    const sticky = service('web', { sessionAffinity: 'ClientIP' });
    assert.deepEqual(changed([web, api], [sticky, api]), ['default/web:80/TCP']);
  });

  it('treats a missing state as empty', () => {
    const state = build([web, api]).state.IPv4;
    assert.deepEqual([...changedServicePorts(undefined, state)].sort(), [
      'default/api:80/TCP',
      'default/web:80/TCP',
    ]);
    assert.deepEqual([...changedServicePorts(state, undefined)].sort(), [
      'default/api:80/TCP',
      'default/web:80/TCP',
    ]);
  });
});
