import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { groupObjects } from '../../src/sources/cluster-objects.ts';
import { formatSourceNote, formatSourceWarning, readObjects } from '../../src/sources/read-objects.ts';

const service = (name: string, port = 80) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'default' },
  spec: {
    type: 'ClusterIP',
    clusterIP: '10.96.0.20',
    clusterIPs: ['10.96.0.20'],
    ports: [{ port, protocol: 'TCP' }],
  },
});
const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' } };
const noStdin = () => Promise.reject(new Error('stdin must not be read'));

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kproxy-sources-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function write(name: string, content: unknown): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

test('a v1 List (kubectl get -o json) yields its items', async () => {
  const path = await write('list.json', { apiVersion: 'v1', kind: 'List', items: [service('a'), node] });
  const result = await readObjects([path], noStdin);
  assert.ok(result.ok);
  assert.deepEqual(
    result.objects.map((object) => `${object.kind}/${object.metadata.name}`),
    ['Service/a', 'Node/node-1'],
  );
});

test('typed lists (ServiceList) are unwrapped too', async () => {
  const path = await write('svclist.json', { apiVersion: 'v1', kind: 'ServiceList', items: [service('b')] });
  const result = await readObjects([path], noStdin);
  assert.deepEqual(result.ok && result.objects.map((object) => object.metadata.name), ['b']);
});

test('the items of a typed list take its kind and apiVersion when they carry none (kubectl get --raw, cluster-info dump)', async () => {
  const { apiVersion: _, kind: __, ...bare } = service('bare');
  const path = await write('raw.json', [
    { kind: 'ServiceList', apiVersion: 'v1', items: [bare] },
    { kind: 'NodeList', apiVersion: 'v1', items: [{ metadata: { name: 'node-9' } }] },
    // Both were v1beta1 once: an item says nothing, the list's version holds for it.
    {
      kind: 'EndpointSliceList',
      apiVersion: 'discovery.k8s.io/v1beta1',
      items: [{ metadata: { name: 'old' } }],
    },
  ]);
  const result = await readObjects([path], noStdin);
  assert.ok(result.ok);
  assert.deepEqual(
    result.objects.map(
      (object) => `${object.kind} ${object.metadata.namespace ?? ''}/${object.metadata.name}`,
    ),
    ['Service default/bare', 'Node /node-9'],
  );
  assert.deepEqual(result.warnings.map(formatSourceWarning), [
    `${path}: EndpointSlice default/old skipped: EndpointSlice "discovery.k8s.io/v1beta1" is not supported (want discovery.k8s.io/v1): feed \`kubectl get endpointslices -A -o yaml\` from the cluster (what it serves today)`,
  ]);
});

test('an item that says its own kind keeps it, in a typed list or a kind: List', async () => {
  const path = await write('mixed-list.json', {
    kind: 'ServiceList',
    apiVersion: 'v1',
    items: [node, { kind: 'Service', metadata: { name: 'no-version' }, spec: { clusterIP: '10.96.0.9' } }],
  });
  const result = await readObjects([path], noStdin);
  assert.deepEqual(result.ok && result.objects.map((object) => `${object.kind}/${object.metadata.name}`), [
    'Node/node-1',
    'Service/no-version',
  ]);
});

test('an item of a kind: List without a kind is invalid, named by its own namespace only (a Node has none)', async () => {
  const path = await write('kindless.json', {
    kind: 'List',
    items: [{ metadata: { name: 'n1' } }, { metadata: { name: 'p', namespace: 'ns' } }],
  });
  const result = await readObjects([path], noStdin);
  assert.deepEqual(result.ok && result.warnings.map((warning) => warning.object), [
    'object n1',
    'object ns/p',
  ]);
});

test('a single object and multi-document YAML both work', async () => {
  const single = await write('single.yaml', 'kind: Node\napiVersion: v1\nmetadata:\n  name: node-2\n');
  const multi = await write(
    'multi.yaml',
    `${JSON.stringify(service('c'))}\n---\n${JSON.stringify(service('d'))}\n---\n# trailing\n`,
  );
  const result = await readObjects([single, multi], noStdin);
  assert.deepEqual(result.ok && result.objects.map((object) => object.metadata.name), ['node-2', 'c', 'd']);
});

test('- reads stdin (once, even when given twice)', async () => {
  let reads = 0;
  const stdin = async () => {
    reads++;
    return JSON.stringify(service('from-stdin'));
  };
  const result = await readObjects(['-', '-'], stdin);
  assert.deepEqual(result.ok && result.objects.map((object) => object.metadata.name), ['from-stdin']);
  assert.equal(reads, 1);
});

test('a directory reads its .yaml, .yml and .json files and its subdirectories’, in path order, and nothing else', async () => {
  const sub = join(dir, 'cluster');
  // As `kubectl cluster-info dump --output-directory` lays it out: a directory per namespace,
  // one per pod in it with the pod's logs.
  await mkdir(join(sub, 'kube-system', 'coredns-1'), { recursive: true });
  await mkdir(join(sub, 'dir.yaml'));
  await writeFile(join(sub, 'b.yml'), JSON.stringify(service('second')));
  await writeFile(join(sub, 'a.json'), JSON.stringify(service('first')));
  await writeFile(join(sub, 'c.yaml'), JSON.stringify(service('third')));
  await writeFile(join(sub, 'kube-system', 'services.json'), JSON.stringify(service('in-namespace')));
  await writeFile(join(sub, 'kube-system', 'coredns-1', 'logs.txt'), 'not: [yaml');
  await writeFile(join(sub, 'notes.txt'), 'not: [yaml');
  const result = await readObjects([sub], noStdin);
  assert.deepEqual(result.ok && result.objects.map((object) => object.metadata.name), [
    'first',
    'second',
    'third',
    'in-namespace',
  ]);
});

test('an invalid object is skipped with a warning naming file, object and field; the rest is kept', async () => {
  const path = await write('mixed.json', { kind: 'List', items: [service('bad', 70000), service('good')] });
  const result = await readObjects([path], noStdin);
  assert.ok(result.ok);
  assert.deepEqual(
    result.objects.map((object) => object.metadata.name),
    ['good'],
  );
  assert.equal(result.warnings.length, 1);
  const line = formatSourceWarning(result.warnings[0]!);
  assert.ok(line.startsWith(`${path}: Service default/bad skipped: spec.ports[0].port`), line);
  assert.match(line, /70000/);
});

test('kinds kproxy does not read are one note per file and kind, with a count and the first name, and no warning', async () => {
  const pods = Array.from({ length: 40 }, (_, i) => ({
    metadata: { name: `p${i}`, namespace: 'kube-system' },
  }));
  const dump = await write(
    'dump.json',
    `${JSON.stringify({ kind: 'PodList', apiVersion: 'v1', items: pods })}\n${JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'c', namespace: 'default' } })}\n`,
  );
  const other = await write(
    'more-pods.yaml',
    'kind: Pod\napiVersion: v1\nmetadata: {name: q, namespace: default}\n',
  );
  const result = await readObjects([dump, other], noStdin);
  assert.ok(result.ok);
  assert.deepEqual(result.warnings, []);
  const why = 'not used: kproxy reads only Services, EndpointSlices, Nodes and ServiceCIDRs';
  assert.deepEqual(result.notes.map(formatSourceNote), [
    `${dump}: 40 Pod objects (Pod kube-system/p0, ...) ${why}`,
    `${dump}: ConfigMap default/c ${why}`,
    `${other}: Pod default/q ${why}`,
  ]);
});

test('legacy Endpoints are a note beside EndpointSlices, and a warning when the input has no EndpointSlice at all', async () => {
  const endpoints = { apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'web', namespace: 'default' } };
  const slice = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'web-x', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
  };
  const legacyOnly = await write('legacy.json', { kind: 'List', items: [service('web'), endpoints] });
  const alone = await readObjects([legacyOnly], noStdin);
  assert.ok(alone.ok);
  assert.deepEqual(alone.notes, []);
  assert.equal(alone.warnings.length, 1);
  assert.match(
    formatSourceWarning(alone.warnings[0]!),
    /Endpoints default\/web skipped: .*no EndpointSlice.*kubectl get endpointslices/,
  );
  // The slices may come in another file.
  const slices = await write('slices.json', slice);
  const both = await readObjects([legacyOnly, slices], noStdin);
  assert.ok(both.ok);
  assert.deepEqual(both.warnings, []);
  assert.deepEqual(
    both.notes.map((note) => note.object),
    ['Endpoints default/web'],
  );
});

test('FQDN EndpointSlices are a note; a Service without a cluster IP is a warning naming it, headless and ExternalName ones are not', async () => {
  const manifest = (name: string, spec: object) => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name },
    spec,
  });
  const path = await write('manifests.yaml', {
    kind: 'List',
    items: [
      manifest('web', { ports: [{ port: 80 }] }),
      manifest('api', { type: 'NodePort', clusterIP: '', ports: [{ port: 80 }] }),
      manifest('db', { clusterIP: 'None', ports: [{ port: 5432 }] }),
      manifest('ext', { type: 'ExternalName', externalName: 'example.com' }),
      {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name: 'fq', namespace: 'default' },
        addressType: 'FQDN',
        endpoints: [{ addresses: ['db.example.com'] }],
      },
    ],
  });
  const result = await readObjects([path], noStdin);
  assert.ok(result.ok);
  assert.deepEqual(result.warnings.map(formatSourceWarning), [
    `${path}: 2 Services (Service default/web, Service default/api) skipped: no spec.clusterIP: a manifest, not what the cluster serves (the API server gives every Service one), so no rules; feed \`kubectl get services,endpointslices -A -o yaml\` output`,
  ]);
  assert.deepEqual(result.notes.map(formatSourceNote), [
    `${path}: EndpointSlice default/fq not used: FQDN slices are not proxied (nor by kube-proxy)`,
  ]);
});

test('a file that does not parse stops reading with file:line', async () => {
  const good = await write('good.json', service('x'));
  const bad = await write('broken.yaml', 'kind: Service\nmetadata: {name: x\n');
  const result = await readObjects([good, bad], noStdin);
  assert.equal(result.ok, false);
  assert.match(!result.ok ? result.error : '', new RegExp(`^${bad.replaceAll('.', '\\.')}:\\d+: `));
});

test('a missing file is a user error naming it', async () => {
  const missing = join(dir, 'nope.yaml');
  assert.deepEqual(await readObjects([missing], noStdin), {
    ok: false,
    error: `${missing}: no such file or directory`,
  });
});

test('a directory without input files is an error, not an empty cluster', async () => {
  const empty = join(dir, 'empty');
  await mkdir(empty);
  assert.deepEqual(await readObjects([empty], noStdin), {
    ok: false,
    error: `${empty}: directory has no .yaml, .yml or .json file`,
  });
});

test('groupObjects sorts objects by kind, keeping input order', async () => {
  const path = await write('group.json', { kind: 'List', items: [node, service('s1'), service('s2')] });
  const result = await readObjects([path], noStdin);
  assert.ok(result.ok);
  const grouped = groupObjects(result.objects);
  assert.deepEqual(
    grouped.services.map((object) => object.metadata.name),
    ['s1', 's2'],
  );
  assert.deepEqual(
    grouped.nodes.map((object) => object.metadata.name),
    ['node-1'],
  );
  assert.deepEqual(grouped.endpointSlices, []);
});

test('deeply nested arrays and cyclic YAML aliases are skipped with a warning, not a stack overflow', async () => {
  const deep = await write('deep.json', `${'['.repeat(100_000)}${']'.repeat(100_000)}`);
  const cyclicList = await write('cyclic-list.yaml', '- &a [*a]\n');
  const cyclicObject = await write(
    'cyclic-object.yaml',
    '&a {kind: Service, metadata: {name: x}, spec: {ports: *a}}\n',
  );
  for (const path of [deep, cyclicList, cyclicObject]) {
    const result = await readObjects([path], noStdin);
    assert.ok(result.ok, path);
    assert.equal(result.objects.length, 0, path);
    assert.equal(result.warnings.length, 1, path);
    assert.ok(formatSourceWarning(result.warnings[0]!).length < 200, path);
  }
});

test('Services with no EndpointSlice anywhere in the input (a cluster-info dump) are one note per file', async () => {
  const dump = await write('no-slices.json', {
    kind: 'ServiceList',
    apiVersion: 'v1',
    items: [service('a'), service('b')],
  });
  const result = await readObjects([dump], noStdin);
  assert.ok(result.ok);
  assert.deepEqual(result.warnings, []);
  assert.deepEqual(result.notes.map(formatSourceNote), [
    `${dump}: 2 Services (Service default/a, ...) render without endpoints: the input has no EndpointSlice; feed \`kubectl get endpointslices -A -o yaml\` too`,
  ]);
});
