import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeTestPki, type TestPki } from '../../harness/apiserver/certs.ts';
import { formatConfigError } from '../../src/kube/connection.ts';
import { kubeconfigPaths, loadKubeconfig } from '../../src/kube/kubeconfig.ts';
import { loadConnection } from '../../src/kube/load-connection.ts';

const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('kubeconfig', () => {
  let pki: TestPki;
  let dir: string;
  before(() => {
    pki = makeTestPki();
    dir = mkdtempSync(join(tmpdir(), 'kproxy-kubeconfig-'));
  });
  after(() => {
    pki.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a kubeadm admin.conf with inline certificate data', async () => {
    const file = join(dir, 'admin.conf');
    writeFileSync(
      file,
      `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: ${b64(pki.caCert)}
    server: https://192.168.56.10:6443
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: kubernetes-admin
  name: kubernetes-admin@kubernetes
current-context: kubernetes-admin@kubernetes
kind: Config
preferences: {}
users:
- name: kubernetes-admin
  user:
    client-certificate-data: ${b64(pki.clientCert)}
    client-key-data: ${b64(pki.clientKey)}
`,
    );
    const result = await loadKubeconfig([file]);
    assert.ok(result.ok, JSON.stringify(result));
    const c = result.connection;
    assert.equal(c.server, 'https://192.168.56.10:6443');
    assert.equal(c.ca, pki.caCert);
    assert.equal(c.cert, pki.clientCert);
    assert.equal(c.key, pki.clientKey);
    assert.equal(c.tokenSource, undefined);
  });

  test('file paths are resolved against the kubeconfig directory; tokenFile is read (and re-read)', async () => {
    const sub = join(dir, 'kube-proxy');
    mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, 'ca.crt'), pki.caCert);
    writeFileSync(join(sub, 'token'), 'abc.def\n');
    const file = join(sub, 'kubeconfig.yaml');
    writeFileSync(
      file,
      `apiVersion: v1
kind: Config
clusters:
- name: default
  cluster:
    certificate-authority: ca.crt
    server: https://10.96.0.1:443
    tls-server-name: kubernetes.default.svc
contexts:
- name: default
  context: {cluster: default, namespace: kube-system, user: kube-proxy}
current-context: default
users:
- name: kube-proxy
  user:
    tokenFile: ./token
`,
    );
    const result = await loadKubeconfig([file]);
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.connection.ca, pki.caCert);
    assert.equal(result.connection.tlsServerName, 'kubernetes.default.svc');
    assert.equal(await result.connection.tokenSource?.token(), 'abc.def');
    writeFileSync(join(sub, 'token'), 'rotated');
    result.connection.tokenSource?.invalidate();
    assert.equal(await result.connection.tokenSource?.token(), 'rotated');
  });

  test('several files merge like kubectl: the first to define a name or current-context wins', async () => {
    const first = join(dir, 'first.yaml');
    const second = join(dir, 'second.yaml');
    writeFileSync(
      first,
      `clusters:
- name: prod
  cluster: {server: 'https://prod.example:6443', insecure-skip-tls-verify: true}
users:
- name: me
  user: {token: first-token}
`,
    );
    writeFileSync(
      second,
      `clusters:
- name: prod
  cluster: {server: 'https://shadowed.example:6443'}
contexts:
- name: prod
  context: {cluster: prod, user: me}
users:
- name: me
  user: {token: second-token}
current-context: prod
`,
    );
    const result = await loadKubeconfig([first, join(dir, 'missing.yaml'), second]);
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.connection.server, 'https://prod.example:6443');
    assert.equal(result.connection.insecureSkipTlsVerify, true);
    assert.equal(await result.connection.tokenSource?.token(), 'first-token');
    assert.deepEqual(kubeconfigPaths(undefined, { KUBECONFIG: `${first}:${second}` }), [first, second]);
    assert.deepEqual(kubeconfigPaths('/explicit', { KUBECONFIG: first }), ['/explicit']);
    assert.deepEqual(kubeconfigPaths(undefined, {}, '/home/u'), ['/home/u/.kube/config']);
  });

  test('--context picks another context; --master overrides the server', async () => {
    const file = join(dir, 'two-contexts.yaml');
    writeFileSync(
      file,
      `clusters:
- {name: a, cluster: {server: 'https://a:6443'}}
- {name: b, cluster: {server: 'https://b:6443'}}
contexts:
- {name: a, context: {cluster: a}}
- {name: b, context: {cluster: b}}
current-context: a
`,
    );
    const b = await loadKubeconfig([file], { context: 'b' });
    assert.ok(b.ok);
    assert.equal(b.connection.server, 'https://b:6443');
    const mastered = await loadConnection({ kubeconfig: file, master: 'https://override:6443', env: {} });
    assert.ok(mastered.ok);
    assert.equal(mastered.connection.server, 'https://override:6443');
    const masterOnly = await loadConnection({ master: 'http://127.0.0.1:8080', env: {} });
    assert.ok(masterOnly.ok);
    assert.equal(masterOnly.connection.server, 'http://127.0.0.1:8080');
  });

  test('insecure-skip-tls-verify works but is warned about; proxy-url is kept', async () => {
    const file = join(dir, 'insecure.yaml');
    writeFileSync(
      file,
      `clusters: [{name: c, cluster: {server: 'https://c:6443', insecure-skip-tls-verify: true, proxy-url: 'http://squid:3128'}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
`,
    );
    const result = await loadKubeconfig([file]);
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.connection.insecureSkipTlsVerify, true);
    assert.equal(result.connection.proxyUrl, 'http://squid:3128');
    assert.deepEqual(result.warnings, [
      `${file}: clusters[0].cluster.insecure-skip-tls-verify: the API server's certificate is not verified`,
    ]);
    // Through loadConnection (what the daemon calls) too.
    const viaLoad = await loadConnection({ kubeconfig: file, env: {} });
    assert.ok(viaLoad.ok);
    assert.equal(viaLoad.warnings?.length, 1);
  });

  test('tokenFile wins over token; the token stands in while the file cannot be read (client-go)', async () => {
    const tokenFile = join(dir, 'both-token');
    writeFileSync(tokenFile, 'from-file\n');
    const file = join(dir, 'both.yaml');
    writeFileSync(
      file,
      `clusters: [{name: c, cluster: {server: 'https://c'}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: inline, tokenFile: both-token}}]
current-context: x
`,
    );
    const result = await loadKubeconfig([file]);
    assert.ok(result.ok);
    assert.equal(await result.connection.tokenSource?.token(), 'from-file');
    rmSync(tokenFile);
    const again = await loadKubeconfig([file]);
    assert.ok(again.ok);
    assert.equal(await again.connection.tokenSource?.token(), 'inline');
  });

  test('mistakes come back as errors naming the file and field', async () => {
    const cases: [string, string, RegExp][] = [
      [
        'no-context.yaml',
        'clusters: []\n',
        /no-context\.yaml: current-context is not set, so there is no cluster to use \(client-go: "cluster has no server defined"\); set it with kubectl config use-context NAME$/,
      ],
      [
        'dangling.yaml',
        'contexts:\n- {name: x, context: {cluster: nowhere}}\ncurrent-context: x\n',
        /dangling\.yaml: contexts\[0\]\.context\.cluster: cluster "nowhere" not found/,
      ],
      [
        'exec.yaml',
        `clusters: [{name: c, cluster: {server: 'https://c'}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {exec: {command: aws}}}]
current-context: x
`,
        /users\[0\]\.user\.exec\.apiVersion: apiVersion must be specified for users\[0\]\.user\.exec to use exec authentication plugin/,
      ],
      [
        'auth-provider.yaml',
        `clusters: [{name: c, cluster: {server: 'https://c'}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {auth-provider: {name: gcp}}}]
current-context: x
`,
        /users\[0\]\.user\.auth-provider: not supported/,
      ],
      [
        'insecure-with-ca.yaml',
        `clusters: [{name: c, cluster: {server: 'https://c', insecure-skip-tls-verify: true, certificate-authority-data: CA}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
`.replace('CA', b64('-----BEGIN CERTIFICATE-----\n')),
        /clusters\[0\]\.cluster\.insecure-skip-tls-verify: specifying a root certificates file with the insecure flag is not allowed$/,
      ],
      [
        'ftp-proxy.yaml',
        `clusters: [{name: c, cluster: {server: 'https://c', proxy-url: 'ftp://p:21'}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
`,
        /clusters\[0\]\.cluster\.proxy-url: scheme "ftp" is not supported \(http, https or socks5\)/,
      ],
      [
        'missing-ca.yaml',
        `clusters: [{name: c, cluster: {server: 'https://c', certificate-authority: no-such-ca.crt}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
`,
        /clusters\[0\]\.cluster\.certificate-authority: cannot read .*no-such-ca\.crt/,
      ],
      ['bad-yaml.yaml', 'clusters: [\n', /not valid YAML/],
      // One line with the position, not the parser's quoted line and caret underneath.
      [
        'garbage.yaml',
        'a: b\n\u0001#x: y: z\n',
        /^[^\n]*garbage\.yaml: not valid YAML: [^\n]* at line 2, column \d+$/,
      ],
    ];
    for (const [name, text, expected] of cases) {
      const file = join(dir, name);
      writeFileSync(file, text);
      const result = await loadKubeconfig([file]);
      assert.ok(!result.ok, name);
      assert.match(formatConfigError(result.error), expected);
    }
    const missing = await loadKubeconfig([join(dir, 'nope.yaml')]);
    assert.ok(!missing.ok);
    assert.match(formatConfigError(missing.error), /nope\.yaml: cannot read/);
  });
});
