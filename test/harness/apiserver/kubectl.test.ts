// A real kubectl against the stand-in API server: discovery, server-side printing, create, apply
// (client-side: last-applied annotation and a strategic merge or JSON merge PATCH), get -o yaml,
// delete, get -w; and kproxy's informers, reading the same kubeconfig, see each change. kubectl is
// Debian's `kubernetes-client` (scripts/test.sh installs it as root) or any kubectl on PATH;
// KUBECTL=/path/to/kubectl picks another.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { makeTestPki } from '../../../harness/apiserver/certs.ts';
import { standInKubeconfig } from '../../../harness/apiserver/kubeconfig.ts';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../../harness/apiserver/sample-objects.ts';
import { startApiServer } from '../../../harness/apiserver/server.ts';
import { loadKubeconfig } from '../../../src/kube/kubeconfig.ts';
import type { KubeObject } from '../../../src/kube/objects.ts';
import { ENDPOINT_SLICES, NODES, SERVICES } from '../../../src/kube/resources.ts';
import { eventually, startTestInformer } from '../../kube/harness.ts';

const run = promisify(execFile);
const KUBECTL = process.env.KUBECTL ?? 'kubectl';
const TOKEN = 'kubectl-test-token';

async function kubectlVersion(): Promise<string | undefined> {
  try {
    return (await run(KUBECTL, ['version', '--client'], { timeout: 30_000 })).stdout.trim().split('\n')[0];
  } catch {
    return undefined;
  }
}

const version = await kubectlVersion();
const isRoot = process.getuid?.() === 0;
if (version === undefined && !isRoot)
  console.error(
    `kubectl test: SKIPPED: no ${KUBECTL} (install Debian's kubernetes-client, or run scripts/test.sh as root)`,
  );

describe(`kubectl against the stand-in API server (${version ?? 'no kubectl'})`, {
  skip: version === undefined && !isRoot,
}, async () => {
  assert.ok(version, `${KUBECTL} is missing: as root, scripts/test.sh installs Debian's kubernetes-client`);
  // TLS, as a real cluster: kubectl sends a kubeconfig's credentials only over TLS.
  const pki = makeTestPki();
  const server = await startApiServer({ tls: { cert: pki.serverCert, key: pki.serverKey }, tokens: [TOKEN] });
  const dir = mkdtempSync(join(tmpdir(), 'kubectl-test-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, standInKubeconfig(server.url, { token: TOKEN, caData: pki.caCert }));
  const loaded = await loadKubeconfig([kubeconfig]);
  assert.ok(loaded.ok);
  const services = startTestInformer<KubeObject>(server, SERVICES, { connection: loaded.connection });
  const slices = startTestInformer<KubeObject>(server, ENDPOINT_SLICES, { connection: loaded.connection });
  after(async () => {
    await services.close();
    await slices.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    pki.remove();
  });

  // HOME in the temporary directory: kubectl's discovery cache stays out of the user's ~/.kube.
  const env = { ...process.env, KUBECONFIG: kubeconfig, HOME: dir };
  const kubectl = async (...args: string[]) => (await run(KUBECTL, args, { env, timeout: 60_000 })).stdout;
  const kubectlFails = async (...args: string[]) => {
    const err = await run(KUBECTL, args, { env, timeout: 60_000 }).then(
      () => assert.fail(`kubectl ${args.join(' ')} succeeded`),
      (e: { stderr: string }) => e,
    );
    return err.stderr;
  };
  const manifest = (name: string, object: unknown) => {
    const file = join(dir, name);
    writeFileSync(file, stringify(object));
    return file;
  };
  /** A table's rows as arrays of cells, header first (columns are separated by 2+ spaces). */
  const rows = (text: string) =>
    text
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s{2,}/));

  server.state.apply(SERVICES, sampleService('web', 'front', { clusterIP: '10.96.0.11' }));
  server.state.apply(
    ENDPOINT_SLICES,
    sampleEndpointSlice('web', 'front-abc', { service: 'front', addresses: ['10.244.1.5', '10.244.2.5'] }),
  );
  const node = sampleNode('node-1', '192.168.0.11') as { status: Record<string, unknown> };
  node.status.conditions = [{ type: 'Ready', status: 'True' }];
  node.status.nodeInfo = { kubeletVersion: 'v1.34.2' };
  server.state.apply(NODES, node);

  test("get services -A: discovery resolves, and the columns are kube-apiserver's server-side printing", async () => {
    const [header, row, ...more] = rows(await kubectl('get', 'services', '-A'));
    assert.deepEqual(header, ['NAMESPACE', 'NAME', 'TYPE', 'CLUSTER-IP', 'EXTERNAL-IP', 'PORT(S)', 'AGE']);
    assert.deepEqual(row!.slice(0, 6), ['web', 'front', 'ClusterIP', '10.96.0.11', '<none>', '80/TCP']);
    assert.match(row![6]!, /^\d+s$/, 'AGE from creationTimestamp, in seconds for a new object');
    assert.deepEqual(more, []);
    // The short name comes from discovery; -o wide adds the priority-1 Selector column.
    assert.deepEqual(rows(await kubectl('get', 'svc', '-n', 'web', '-o', 'wide'))[0]!.at(-1), 'SELECTOR');
  });

  test('get endpointslices -A and get nodes', async () => {
    const [header, row] = rows(await kubectl('get', 'endpointslices', '-A'));
    assert.deepEqual(header, ['NAMESPACE', 'NAME', 'ADDRESSTYPE', 'PORTS', 'ENDPOINTS', 'AGE']);
    assert.deepEqual(row!.slice(0, 5), ['web', 'front-abc', 'IPv4', '8080', '10.244.1.5,10.244.2.5']);
    const nodes = rows(await kubectl('get', 'no', '-o', 'wide'));
    assert.deepEqual(nodes[0]!.slice(0, 6), ['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION', 'INTERNAL-IP']);
    const [name, status, roles, , kubelet, internalIP] = nodes[1]!;
    assert.deepEqual(
      [name, status, roles, kubelet, internalIP],
      ['node-1', 'Ready', '<none>', 'v1.34.2', '192.168.0.11'],
    );
  });

  test('label selectors reach the server', async () => {
    server.state.apply(
      SERVICES,
      sampleService('web', 'back', { clusterIP: '10.96.0.12', labels: { tier: 'back' } }),
    );
    assert.deepEqual(rows(await kubectl('get', 'svc', '-A', '-l', 'tier=back', '-o', 'name')).flat(), [
      'service/back',
    ]);
    assert.deepEqual(rows(await kubectl('get', 'svc', '-A', '-l', '!tier', '-o', 'name')).flat(), [
      'service/front',
    ]);
    await kubectl('delete', 'svc', '-n', 'web', 'back');
  });

  test('create -f: 201 with uid, resourceVersion and creationTimestamp; the informer sees it', async () => {
    const file = manifest('api.yaml', sampleService('web', 'api', { clusterIP: '10.96.0.30' }));
    assert.match(await kubectl('create', '-f', file), /^service\/api created$/m);
    const created = JSON.parse(await kubectl('get', 'svc', '-n', 'web', 'api', '-o', 'json'));
    assert.match(created.metadata.uid, /^[0-9a-f-]{36}$/);
    assert.match(created.metadata.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(
      created.metadata.resourceVersion,
      String(server.state.get(SERVICES, 'web', 'api')?.metadata.resourceVersion),
    );
    await eventually(() =>
      assert.equal(
        services.delivered.get('web/api')?.metadata.resourceVersion,
        created.metadata.resourceVersion,
      ),
    );
    assert.match(await kubectlFails('create', '-f', file), /AlreadyExists|already exists/);
  });

  test('apply -f creates, then patches (a port changed, a label added), and the informer sees both', async () => {
    const service = sampleService('web', 'applied', { clusterIP: '10.96.0.40' });
    assert.match(await kubectl('apply', '-f', manifest('applied.yaml', service)), /service\/applied created/);
    const annotated = server.state.get(SERVICES, 'web', 'applied')!.metadata as {
      annotations?: Record<string, string>;
    };
    assert.ok(
      annotated.annotations?.['kubectl.kubernetes.io/last-applied-configuration'],
      'the last-applied annotation is kept',
    );
    const changed = sampleService('web', 'applied', {
      clusterIP: '10.96.0.40',
      port: 8443,
      labels: { tier: 'edge' },
    });
    assert.match(
      await kubectl('apply', '-f', manifest('applied.yaml', changed)),
      /service\/applied configured/,
    );
    const patch = server.requests.findLast((r) => r.method === 'PATCH');
    assert.equal(patch?.path, '/api/v1/namespaces/web/services/applied');
    const yaml = await kubectl('get', 'svc', 'applied', '-n', 'web', '-o', 'yaml');
    assert.match(yaml, /port: 8443/);
    assert.doesNotMatch(yaml, /port: 80\n/, 'the old port is gone: the patch deleted it by its merge key');
    assert.match(yaml, /tier: edge/);
    assert.match(
      await kubectl('apply', '-f', manifest('applied.yaml', changed)),
      /service\/applied unchanged/,
    );
    await eventually(() => {
      const seen = services.delivered.get('web/applied') as
        | { spec?: { ports?: { port: number }[] } }
        | undefined;
      assert.deepEqual(
        seen?.spec?.ports?.map((p) => p.port),
        [8443],
      );
    });
    // An EndpointSlice: apply moves an endpoint; the informer sees the new address.
    const slice = (address: string) =>
      sampleEndpointSlice('web', 'applied-1', { service: 'applied', addresses: [address] });
    await kubectl('apply', '-f', manifest('slice.yaml', slice('10.244.3.1')));
    assert.match(await kubectl('apply', '-f', manifest('slice.yaml', slice('10.244.3.2'))), /configured/);
    await eventually(() => {
      const seen = slices.delivered.get('web/applied-1') as
        | { endpoints?: { addresses: string[] }[] }
        | undefined;
      assert.deepEqual(
        seen?.endpoints?.map((e) => e.addresses),
        [['10.244.3.2']],
      );
    });
  });

  test('get NAME: the object as YAML; a missing one is a NotFound Status', async () => {
    const yaml = await kubectl('get', 'svc', 'front', '-n', 'web', '-o', 'yaml');
    assert.match(yaml, /^kind: Service$/m);
    assert.match(yaml, /clusterIP: 10\.96\.0\.11/);
    assert.match(
      await kubectlFails('get', 'svc', 'nothing', '-n', 'web'),
      /\(NotFound\): services "nothing" not found/,
    );
  });

  test('get -w prints the change it watches; delete removes the object and the informer sees it', async () => {
    // Bounded: --request-timeout ends the watch, and the process is killed if it outlives it.
    const watch = spawn(KUBECTL, ['get', 'svc', '-n', 'web', '-w', '--request-timeout=20s'], { env });
    let out = '';
    watch.stdout.on('data', (d: Buffer) => {
      out += d;
    });
    const ended = new Promise((resolve) => watch.on('close', resolve));
    try {
      await eventually(() => assert.match(out, /^api\s/m), 20_000);
      assert.match(await kubectl('delete', 'svc', 'api', '-n', 'web'), /service "api" deleted/);
      await eventually(() => assert.equal(out.match(/^api\s/gm)?.length, 2, out), 20_000);
    } finally {
      watch.kill();
      await ended;
    }
    assert.equal(server.state.get(SERVICES, 'web', 'api'), undefined);
    await eventually(() => assert.equal(services.delivered.has('web/api'), false));
    assert.match(await kubectlFails('delete', 'svc', 'api', '-n', 'web'), /NotFound/);
  });
});
