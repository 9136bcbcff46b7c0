// The stand-in API server as a process, for the netns lab and the memory benchmark:
//   node harness/apiserver/main.ts [--host H] [--port N] [--data FILE] [--token T]...
//     [--tls-cert PEM --tls-key PEM [--client-ca PEM]] [--history-limit N] [--no-watch-list]
//     [--version 1.29..1.38] [--forbid RESOURCE]...
// --version serves what that Kubernetes minor serves (profiles.ts; the newest by default); --forbid
// answers 403 for a resource (RBAC that does not grant it). Lines on stdin restart it as another
// minor, state kept, or arm faults (control-lines.ts); each is answered on stdout once done.
// FILE is YAML or JSON: a List, or documents, of Services, EndpointSlices and Nodes (kubectl -o yaml
// output works). Prints "listening <url>" once ready; stops on SIGTERM/SIGINT. kubectl can drive it
// (kubeconfig.ts writes a kubeconfig for it; lab/README.md says what works).

import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { flushCompileCache } from 'node:module';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { RESOURCE_TYPES, type ResourceType } from '../../src/kube/resources.ts';
import { applyControlLine } from './control-lines.ts';
import { isMinor, NEWEST_MINOR } from './profiles.ts';
import { startApiServer } from './server.ts';

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '0' },
    data: { type: 'string' },
    token: { type: 'string', multiple: true },
    'bookmark-interval-ms': { type: 'string', default: '1000' },
    'tls-cert': { type: 'string' },
    'tls-key': { type: 'string' },
    'client-ca': { type: 'string' },
    'history-limit': { type: 'string' },
    'no-watch-list': { type: 'boolean', default: false },
    version: { type: 'string', default: NEWEST_MINOR },
    forbid: { type: 'string', multiple: true },
  },
});

const version = values.version;
if (!isMinor(version)) {
  console.error(`--version ${version}: not a minor the stand-in serves (1.29..1.38)`);
  process.exit(2);
}
const forbidden = (values.forbid ?? []).map((plural) => {
  const resource = RESOURCE_TYPES.find((r) => r.plural === plural);
  if (!resource) {
    console.error(`--forbid ${plural}: not a resource the stand-in serves`);
    process.exit(2);
  }
  return resource.plural;
}) satisfies ResourceType['plural'][];

const tlsCert = values['tls-cert'];
const tlsKey = values['tls-key'];
if ((tlsCert === undefined) !== (tlsKey === undefined)) {
  console.error('--tls-cert and --tls-key go together');
  process.exit(2);
}
const clientCa = values['client-ca'];

const server = await startApiServer({
  host: values.host,
  port: Number(values.port),
  bookmarkIntervalMs: Number(values['bookmark-interval-ms']),
  version,
  forbidden,
  ...(values['no-watch-list'] ? { watchList: false } : {}),
  ...(values['history-limit'] ? { historyLimit: Number(values['history-limit']) } : {}),
  ...(tlsCert && tlsKey
    ? {
        tls: {
          cert: readFileSync(tlsCert, 'utf8'),
          key: readFileSync(tlsKey, 'utf8'),
          ...(clientCa ? { clientCa: readFileSync(clientCa, 'utf8') } : {}),
        },
      }
    : {}),
  ...(values.token ? { tokens: values.token } : {}),
});

if (values.data) {
  const text = await readFile(values.data, 'utf8');
  // JSON is YAML, but the JSON parser is far faster for the benchmark's large files.
  const docs: unknown[] = values.data.endsWith('.json')
    ? [JSON.parse(text)]
    : parseAllDocuments(text).map((d) => d.toJS());
  const objects = docs.flatMap((d) => {
    const doc = d as { kind?: string; items?: unknown[] } | null;
    return doc?.items && doc.kind?.endsWith('List') ? doc.items : doc ? [doc] : [];
  }) as { kind?: string }[];
  for (const [i, object] of objects.entries()) {
    const resource = RESOURCE_TYPES.find((r) => r.kind === object.kind);
    if (!resource) {
      console.error(`${values.data}: object ${i}: kind ${JSON.stringify(object.kind)} is not served`);
      process.exit(2);
    }
    const result = server.state.apply(resource, object);
    if (!result.ok) {
      console.error(`${values.data}: object ${i}: ${result.message}`);
      process.exit(2);
    }
  }
}

console.log(`listening ${server.url}`);
createInterface({ input: process.stdin }).on('line', (line) => {
  applyControlLine(server, line).then((answer) =>
    answer.ok ? console.log(answer.line) : console.error(`stdin: ${answer.error}`),
  );
});
// Tests end it with a signal, and a killed node never writes its compile cache (NODE_COMPILE_CACHE):
// write it now, or each start in the qemu VM strips the TypeScript again (a cold start took 2-3× a warm one there).
flushCompileCache();
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.stop().then(() => process.exit(0));
  });
}
