import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadInCluster } from '../../src/kube/in-cluster.ts';
import { loadConnection } from '../../src/kube/load-connection.ts';
import { FileTokenSource, jwtExpiryMs } from '../../src/kube/token-source.ts';

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

/** A JWT-shaped token with an exp claim (the signature is irrelevant to the client). */
function jwt(expSeconds: number, tag: string): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'RS256' })}.${part({ exp: expSeconds, sub: 'system:serviceaccount:kube-system:kube-proxy' })}.${tag}`;
}

function serviceAccountDir(token: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'kproxy-sa-'));
  writeFileSync(join(dir, 'token'), token);
  writeFileSync(join(dir, 'ca.crt'), CA);
  writeFileSync(join(dir, 'namespace'), 'kube-system');
  return dir;
}

test('in-cluster config: server from KUBERNETES_SERVICE_HOST/PORT, CA and token from the service account', async (t) => {
  const dir = serviceAccountDir(jwt(2_000_000_000, 'sig'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const result = await loadInCluster({
    env: { KUBERNETES_SERVICE_HOST: 'fd00:10:96::1', KUBERNETES_SERVICE_PORT: '443' },
    serviceAccountDir: dir,
  });
  assert.ok(result.ok, JSON.stringify(result));
  assert.equal(result.connection.server, 'https://[fd00:10:96::1]:443');
  assert.equal(result.connection.ca, CA);
  assert.equal(await result.connection.tokenSource?.token(), jwt(2_000_000_000, 'sig'));
  // Neither --kubeconfig, --master nor KUBECONFIG: in-cluster is the default.
  const viaDefault = await loadConnection({
    env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
    serviceAccountDir: dir,
  });
  assert.ok(viaDefault.ok);
  assert.equal(viaDefault.connection.server, 'https://10.96.0.1:443');
});

test('in-cluster config outside a cluster, or without a token, is a user error', async (t) => {
  const outside = await loadInCluster({ env: {} });
  assert.ok(!outside.ok);
  assert.match(outside.error.reason, /KUBERNETES_SERVICE_HOST/);
  const dir = mkdtempSync(join(tmpdir(), 'kproxy-sa-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const noToken = await loadInCluster({
    env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
    serviceAccountDir: dir,
  });
  assert.ok(!noToken.ok);
  assert.equal(noToken.error.file, join(dir, 'token'));
});

test('the token file is re-read after maxAge, and before the token expires', async (t) => {
  const dir = serviceAccountDir('first');
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let now = 1_000_000;
  const source = new FileTokenSource(join(dir, 'token'), { maxAgeMs: 60_000, now: () => now });
  assert.equal(await source.token(), 'first');
  writeFileSync(join(dir, 'token'), 'second');
  now += 30_000;
  assert.equal(await source.token(), 'first', 'cached within maxAge');
  now += 30_001;
  assert.equal(await source.token(), 'second', 're-read after maxAge');

  // A token expiring in 20 s is re-read 10 s before it expires, well inside maxAge.
  const expiring = jwt(Math.floor(now / 1000) + 20, 'a');
  writeFileSync(join(dir, 'token'), expiring);
  source.invalidate();
  assert.equal(await source.token(), expiring);
  writeFileSync(join(dir, 'token'), 'fresh');
  now += 9_000;
  assert.equal(await source.token(), expiring);
  now += 2_000;
  assert.equal(await source.token(), 'fresh');
  assert.equal(jwtExpiryMs('not-a-jwt'), undefined);
});
