import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { groupObjects } from '../../src/sources/cluster-objects.ts';
import { formatSourceWarning, readObjects } from '../../src/sources/read-objects.ts';

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

test('a directory reads its .yaml, .yml and .json files in name order and nothing else', async () => {
  const sub = join(dir, 'cluster');
  await mkdir(sub);
  await writeFile(join(sub, 'b.yml'), JSON.stringify(service('second')));
  await writeFile(join(sub, 'a.json'), JSON.stringify(service('first')));
  await writeFile(join(sub, 'c.yaml'), JSON.stringify(service('third')));
  await writeFile(join(sub, 'notes.txt'), 'not: [yaml');
  const result = await readObjects([sub], noStdin);
  assert.deepEqual(result.ok && result.objects.map((object) => object.metadata.name), [
    'first',
    'second',
    'third',
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

test('other kinds (Pods, ConfigMaps) are ignored without a warning', async () => {
  const path = await write(
    'pods.yaml',
    'kind: Pod\napiVersion: v1\nmetadata: {name: p}\n---\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\n',
  );
  const result = await readObjects([path], noStdin);
  assert.deepEqual(result, { ok: true, objects: [], warnings: [] });
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
