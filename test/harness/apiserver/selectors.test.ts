import assert from 'node:assert/strict';
import { test } from 'node:test';
import { matches, parseFieldSelector, parseLabelSelector } from '../../../harness/apiserver/selectors.ts';

function labelSelects(selector: string, labels: Record<string, string>): boolean {
  const parsed = parseLabelSelector(selector);
  assert.ok(parsed.ok, selector);
  return matches(parsed.selector, labels);
}

test('label selectors follow kube-apiserver semantics for =, !=, exists, !exists, in, notin', () => {
  assert.equal(labelSelects('app=web', { app: 'web' }), true);
  assert.equal(labelSelects('app==web', { app: 'db' }), false);
  // != also selects objects without the label at all.
  assert.equal(labelSelects('tier!=db', {}), true);
  assert.equal(labelSelects('tier!=db', { tier: 'db' }), false);
  assert.equal(
    labelSelects('service.kubernetes.io/headless', { 'service.kubernetes.io/headless': '' }),
    true,
  );
  assert.equal(
    labelSelects('!service.kubernetes.io/headless', { 'service.kubernetes.io/headless': '' }),
    false,
  );
  assert.equal(labelSelects('env in (prod, staging),app', { env: 'staging', app: 'x' }), true);
  assert.equal(labelSelects('env in (prod,staging)', {}), false);
  assert.equal(labelSelects('env notin (prod)', {}), true);
  assert.equal(labelSelects('', { any: 'thing' }), true);
});

test('field selectors accept metadata.name and metadata.namespace only', () => {
  const parsed = parseFieldSelector('metadata.name=node-1');
  assert.ok(parsed.ok);
  assert.equal(matches(parsed.selector, { 'metadata.name': 'node-1', 'metadata.namespace': '' }), true);
  assert.equal(matches(parsed.selector, { 'metadata.name': 'node-2', 'metadata.namespace': '' }), false);
  const unsupported = parseFieldSelector('spec.nodeName=x');
  assert.ok(!unsupported.ok);
  assert.match(unsupported.reason, /not supported/);
});
