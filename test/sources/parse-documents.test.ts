import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_YAML_BYTES, parseDocuments } from '../../src/sources/parse-documents.ts';

test('multi-document YAML gives one document per ---, skipping empty ones', () => {
  const text = '---\nkind: Service\nmetadata: {name: a}\n---\n---\nkind: Node\nmetadata: {name: n}\n';
  const result = parseDocuments(text, 'x.yaml');
  assert.deepEqual(result, {
    ok: true,
    documents: [
      { kind: 'Service', metadata: { name: 'a' } },
      { kind: 'Node', metadata: { name: 'n' } },
    ],
  });
});

test('JSON (kubectl -o json) parses as one document', () => {
  const result = parseDocuments('{"kind": "List", "items": [{"kind": "Node"}]}\n', 'x.json');
  assert.deepEqual(result, { ok: true, documents: [{ kind: 'List', items: [{ kind: 'Node' }] }] });
});

test('an empty file has no documents', () => {
  assert.deepEqual(parseDocuments('', 'empty.yaml'), { ok: true, documents: [] });
  assert.deepEqual(parseDocuments('# only a comment\n', 'c.yaml'), { ok: true, documents: [] });
});

test('a YAML syntax error names the file and the line', () => {
  const result = parseDocuments(
    'kind: Service\nmetadata:\n  name: web\n  labels: {a: 1\nspec: {}\n',
    'svc.yaml',
  );
  assert.equal(result.ok, false);
  assert.equal(
    !result.ok && result.error,
    'svc.yaml:5: Flow map in block collection must be sufficiently indented and end with a }',
  );
  assert.equal(!result.ok && result.error.split('\n').length, 1, 'one line, no code frame');
});

test('a syntax error in a later document reports that document’s line', () => {
  const result = parseDocuments('kind: Node\n---\nkind: Service\nmetadata: [\n', 'two.yaml');
  assert.equal(result.ok, false);
  assert.match(!result.ok ? result.error : '', /^two\.yaml:5: /);
});

test('broken JSON falls back to the YAML parser and reports file:line', () => {
  const result = parseDocuments('{\n  "kind": "Service",\n  "metadata": {,}\n}\n', 'bad.json');
  assert.deepEqual(result.ok, false);
  assert.equal(!result.ok && result.error, 'bad.json:3: Unexpected , in flow map');
});

test('duplicate keys are a parse error, not a silent overwrite', () => {
  const result = parseDocuments('kind: Service\nkind: Node\n', 'dup.yaml');
  assert.match(!result.ok ? result.error : '', /^dup\.yaml:2: .*unique/);
});

test('an alias to an unknown anchor is a user error, not a crash', () => {
  const result = parseDocuments('kind: Node\n---\nkind: Service\nmetadata: *missing\n', 'alias.yaml');
  assert.match(!result.ok ? result.error : '', /^alias\.yaml:\d+: .*alias/i);
});

test('YAML over MAX_YAML_BYTES is a user error suggesting JSON (a 50 MB file ran out of memory); JSON of that size parses', () => {
  const item = '- {kind: Service, metadata: {name: s}}\n';
  const yaml = `items:\n${item.repeat(Math.ceil(MAX_YAML_BYTES / item.length) + 1)}`;
  const result = parseDocuments(yaml, 'big.yaml');
  assert.equal(result.ok, false);
  assert.match(
    (result as { error: string }).error,
    /^big\.yaml: \d+ MiB of YAML is over the 16 MiB .* -o json/,
  );
  const json = `[${Array.from({ length: MAX_YAML_BYTES / 16 }, () => '{"kind":"Service"}').join(',')}]`;
  assert.ok(json.length > MAX_YAML_BYTES);
  const parsed = parseDocuments(json, 'big.json');
  assert.ok(parsed.ok);
});

test('JSON values one after another, with container logs between them, as `kubectl cluster-info dump` prints them', () => {
  const text = [
    '{\n  "kind": "NodeList",\n  "items": [{"metadata": {"name": "n {1}"}}]\n}',
    '{"kind": "ServiceList", "items": []}',
    '==== START logs for container dns of pod kube-system/dns-1 ====',
    // A log line may look like JSON or like the next container's markers; only its own END line ends it.
    '{"level": "info", "msg": "starting \\"}"}',
    '==== END logs for container other of pod kube-system/other-1 ====',
    '==== END logs for container dns of pod kube-system/dns-1 ====',
    '==== START logs for container empty of pod kube-system/quiet-1 ====',
    '==== END logs for container empty of pod kube-system/quiet-1 ====',
    '[{"kind": "PodList", "items": []}]',
    '',
  ].join('\n');
  assert.deepEqual(parseDocuments(text, 'dump.txt'), {
    ok: true,
    documents: [
      { kind: 'NodeList', items: [{ metadata: { name: 'n {1}' } }] },
      { kind: 'ServiceList', items: [] },
      [{ kind: 'PodList', items: [] }],
    ],
  });
});

test('a JSON stream with an unterminated log section or a broken value is a syntax error with its line', () => {
  const unterminated = '{"kind": "NodeList"}\n==== START logs for container a of pod ns/p ====\nlog\n';
  assert.match(errorOf(parseDocuments(unterminated, 'a.txt')), /^a\.txt:\d+: /);
  const broken = '{"kind": "NodeList"}\n{"kind": \n"ServiceList",}\n';
  assert.match(errorOf(parseDocuments(broken, 'b.txt')), /^b\.txt:\d+: /);
});

function errorOf(result: ReturnType<typeof parseDocuments>): string {
  assert.equal(result.ok, false);
  return result.ok ? '' : result.error;
}
