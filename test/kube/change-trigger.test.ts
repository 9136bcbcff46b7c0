import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { lastChangeTriggerTime, sliceChangeTrigger } from '../../src/kube/change-trigger.ts';
import type { EndpointSlice } from '../../src/kube/objects.ts';

function slice(annotation?: string, addressType = 'IPv4'): EndpointSlice {
  return {
    kind: 'EndpointSlice',
    metadata: {
      name: 'web-abc',
      namespace: 'default',
      ...(annotation
        ? { annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': annotation } }
        : {}),
    },
    addressType,
  };
}

describe('lastChangeTriggerTime', () => {
  test('reads the annotation as RFC 3339 and ignores a missing or malformed one', () => {
    assert.equal(lastChangeTriggerTime(slice('2026-12-02T10:00:00Z')), Date.UTC(2026, 11, 2, 10));
    assert.equal(lastChangeTriggerTime(slice()), undefined);
    assert.equal(lastChangeTriggerTime(slice('yesterday-ish')), undefined);
  });
});

describe('sliceChangeTrigger', () => {
  const at = '2026-12-02T10:00:00Z';
  test('carries the trigger time and the family of the rules that program the slice', () => {
    const t = Date.UTC(2026, 11, 2, 10);
    assert.deepEqual(sliceChangeTrigger(slice(at)), { triggeredAt: t, family: 'IPv4' });
    assert.deepEqual(sliceChangeTrigger(slice(at, 'IPv6')), { triggeredAt: t, family: 'IPv6' });
  });

  test('is undefined without a valid trigger time, and for FQDN slices, which program nothing', () => {
    assert.equal(sliceChangeTrigger(slice()), undefined);
    assert.equal(sliceChangeTrigger(slice('yesterday-ish')), undefined);
    assert.equal(sliceChangeTrigger(slice(at, 'FQDN')), undefined);
  });
});
