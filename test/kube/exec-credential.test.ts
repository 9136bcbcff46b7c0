import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeTestPki, type TestPki } from '../../harness/apiserver/certs.ts';
import { sampleService } from '../../harness/apiserver/sample-objects.ts';
import { startApiServer } from '../../harness/apiserver/server.ts';
import { KubeClient, type WatchItem } from '../../src/kube/client.ts';
import { formatConfigError } from '../../src/kube/connection.ts';
import {
  type ExecConfig,
  ExecCredentialPlugin,
  MAX_STDERR_BYTES,
  parseExecConfig,
  parseExecCredential,
} from '../../src/kube/exec-credential.ts';
import { loadKubeconfig } from '../../src/kube/kubeconfig.ts';
import type { Service } from '../../src/kube/objects.ts';
import { SERVICES } from '../../src/kube/resources.ts';
import { eventually, expectedStore, startTestInformer, storeContents } from './harness.ts';

const V1 = 'client.authentication.k8s.io/v1';
const V1BETA1 = 'client.authentication.k8s.io/v1beta1';

/**
 * A credential plugin as a shell script in `dir`: counts its runs in `count`, keeps the request it
 * was given (KUBERNETES_EXEC_INFO) and what it saw of env and args, and prints `out.json` when the
 * test wrote one, else an ExecCredential with the token `tok-<run>` (expiring at `expiry` if present).
 */
function writePlugin(dir: string): string {
  const path = join(dir, 'plugin.sh');
  writeFileSync(
    path,
    `#!/bin/sh
dir="$(dirname "$0")"
n=$(( $(cat "$dir/count" 2>/dev/null || echo 0) + 1 ))
echo $n > "$dir/count"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$dir/info.json"
printf '%s' "$PLUGIN_GREETING|$*|$INHERITED" > "$dir/seen"
if [ -f "$dir/out.json" ]; then cat "$dir/out.json"; exit 0; fi
exp=""
[ -f "$dir/expiry" ] && exp=",\\"expirationTimestamp\\":\\"$(cat "$dir/expiry")\\""
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s"%s}}' "\${API_VERSION:-${V1}}" "$n" "$exp"
`,
  );
  chmodSync(path, 0o755);
  return path;
}

function execConfig(command: string, extra: Partial<ExecConfig> = {}): ExecConfig {
  return {
    command,
    args: [],
    env: [],
    apiVersion: V1,
    interactiveMode: 'Never',
    provideClusterInfo: false,
    ...extra,
  };
}

const runs = (dir: string): number =>
  existsSync(join(dir, 'count')) ? Number(readFileSync(join(dir, 'count'), 'utf8')) : 0;

describe('exec credential plugins', () => {
  let dir: string;
  let plugin: string;
  let pki: TestPki;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kproxy-exec-'));
    plugin = writePlugin(dir);
    pki = makeTestPki();
  });
  after(() => {
    pki.remove();
    rmSync(dir, { recursive: true, force: true });
  });
  const reset = (): void => {
    for (const f of ['count', 'info.json', 'seen', 'out.json', 'expiry'])
      rmSync(join(dir, f), { force: true });
  };

  test('user.exec is validated with client-go messages; Always fails (no terminal), v1beta1 defaults to IfAvailable', () => {
    const where = 'users[0].user.exec';
    const cases: [unknown, RegExp][] = [
      [{ apiVersion: V1, interactiveMode: 'Never' }, /command must be specified for users\[0\]\.user\.exec/],
      [{ command: 'x', interactiveMode: 'Never' }, /apiVersion must be specified/],
      [
        { command: 'x', apiVersion: 'client.authentication.k8s.io/v9' },
        /exec plugin: invalid apiVersion "client.authentication.k8s.io\/v9"/,
      ],
      [{ command: 'x', apiVersion: V1 }, /interactiveMode must be specified for users\[0\]\.user\.exec/],
      [
        { command: 'x', apiVersion: V1, interactiveMode: 'Sometimes' },
        /invalid interactiveMode for users\[0\]\.user\.exec: "Sometimes"/,
      ],
      [
        { command: 'x', apiVersion: V1, interactiveMode: 'Always' },
        /^exec plugin cannot support interactive mode: standard input is not a terminal$/,
      ],
      [
        { command: 'x', apiVersion: V1, interactiveMode: 'Never', env: [{ name: 'A' }] },
        /needs a name and a string value/,
      ],
    ];
    for (const [value, expected] of cases) {
      const parsed = parseExecConfig(value, where);
      assert.ok(!parsed.ok, JSON.stringify(value));
      assert.match(parsed.reason, expected);
    }
    const beta = parseExecConfig({ command: 'x', apiVersion: V1BETA1 }, where);
    assert.ok(beta.ok);
    assert.equal(beta.config.interactiveMode, 'IfAvailable');
  });

  test('what the plugin printed is checked as client-go does', () => {
    const cases: [string, RegExp][] = [
      ['hello, please log in', /^decoding stdout: .*\(output began: "hello, please log in"\)/],
      ['', /^decoding stdout: .*\(no output\)/],
      ['{"kind":"Status"}', /couldn't get version\/kind/],
      [
        JSON.stringify({ apiVersion: V1BETA1, kind: 'ExecCredential', status: { token: 't' } }),
        /exec plugin is configured to use API version client.authentication.k8s.io\/v1, plugin returned version client.authentication.k8s.io\/v1beta1/,
      ],
      [JSON.stringify({ apiVersion: V1, kind: 'ExecCredential' }), /didn't return a status field/],
      [
        JSON.stringify({ apiVersion: V1, kind: 'ExecCredential', status: {} }),
        /didn't return a token or cert\/key pair/,
      ],
      [
        JSON.stringify({ apiVersion: V1, kind: 'ExecCredential', status: { clientCertificateData: 'x' } }),
        /returned only certificate or key, not both/,
      ],
      [
        JSON.stringify({
          apiVersion: V1,
          kind: 'ExecCredential',
          status: { token: 't', expirationTimestamp: 'soon' },
        }),
        /expirationTimestamp "soon" is not an RFC 3339 time/,
      ],
    ];
    for (const [stdout, expected] of cases) {
      const result = parseExecCredential(stdout, V1);
      assert.equal(typeof result, 'string', stdout);
      assert.match(result as string, expected);
    }
    assert.deepEqual(
      parseExecCredential(
        JSON.stringify({
          apiVersion: V1,
          kind: 'ExecCredential',
          status: { token: 't', expirationTimestamp: '2030-01-02T03:04:05Z' },
        }),
        V1,
      ),
      { token: 't', expiresAt: Date.parse('2030-01-02T03:04:05Z') },
    );
  });

  test("a failing plugin's whole stderr is kept, its cause first; past MAX_STDERR_BYTES it is cut and says so", async () => {
    // Shaped like gke-gcloud-auth-plugin's failure: the cause on the first line, advice after it.
    const multiLine = join(dir, 'multi-line.sh');
    writeFileSync(
      multiLine,
      `#!/bin/sh
echo 'F1205 08:00:00.000000 cred.go:145] print credential failed with error: Failed to retrieve access token:: invalid_grant: Bad Request' >&2
echo 'Please run:' >&2
echo '' >&2
echo '  $ gcloud auth login' >&2
echo '' >&2
echo 'to obtain new credentials.' >&2
exit 1
`,
    );
    chmodSync(multiLine, 0o755);
    await assert.rejects(new ExecCredentialPlugin(execConfig(multiLine), { env: {} }).credentials(), {
      message:
        /failed with exit code 1: F1205 [^\n]*invalid_grant: Bad Request\nPlease run:\n\n {2}\$ gcloud auth login\n\nto obtain new credentials\.$/,
    });
    const chatty = join(dir, 'chatty.sh');
    // 10,000 bytes of stderr: 1,000 lines of "123456789".
    writeFileSync(
      chatty,
      '#!/bin/sh\ni=0\nwhile [ $i -lt 1000 ]; do echo 123456789 >&2; i=$((i+1)); done\nexit 2\n',
    );
    chmodSync(chatty, 0o755);
    const error = await new ExecCredentialPlugin(execConfig(chatty), { env: { PATH: process.env.PATH } })
      .credentials()
      .then(
        () => assert.fail('the plugin failed'),
        (err: Error) => err.message,
      );
    const kept = error.slice(error.indexOf(': 123456789') + 2);
    assert.match(kept, /\n\[stderr cut: first 4096 of 10000 bytes\]$/);
    assert.equal(kept.length, MAX_STDERR_BYTES + '\n[stderr cut: first 4096 of 10000 bytes]'.length);
  });

  test('a failing, missing, junk-printing or hanging plugin is named in the error (with its installHint)', async () => {
    const failing = join(dir, 'failing.sh');
    writeFileSync(failing, '#!/bin/sh\necho "the refresh token expired; run login" >&2\nexit 3\n');
    chmodSync(failing, 0o755);
    const junk = join(dir, 'junk.sh');
    writeFileSync(junk, '#!/bin/sh\necho "Open https://login.example/device to sign in"\n');
    chmodSync(junk, 0o755);
    // The hang is in a child of the plugin: a timeout must kill the whole group, not wait for it.
    const hanging = join(dir, 'hanging.sh');
    writeFileSync(hanging, '#!/bin/sh\nsleep 60\n');
    chmodSync(hanging, 0o755);
    const cases: [ExecConfig, RegExp][] = [
      [
        execConfig(failing),
        /^getting credentials: exec: executable .*failing\.sh failed with exit code 3: the refresh token expired; run login$/,
      ],
      [
        execConfig(join(dir, 'kubelogin'), { installHint: 'Install kubelogin: see your cluster docs' }),
        /^getting credentials: exec: executable .*kubelogin not found\n\nInstall kubelogin: see your cluster docs$/,
      ],
      [
        execConfig(junk),
        /^getting credentials: decoding stdout: .*output began: "Open https:\/\/login\.example/,
      ],
    ];
    for (const [config, expected] of cases) {
      await assert.rejects(
        new ExecCredentialPlugin(config, { env: { PATH: process.env.PATH } }).credentials(),
        { message: expected },
      );
    }
    // 300 ms is far below the plugin's 60 s sleep: what is checked is that it is killed, not how fast.
    const started = Date.now();
    await assert.rejects(
      new ExecCredentialPlugin(execConfig(hanging), {
        env: { PATH: process.env.PATH },
        timeoutMs: 300,
      }).credentials(),
      {
        message:
          /^getting credentials: exec: executable .*hanging\.sh did not finish within 300 ms \(killed\)$/,
      },
    );
    assert.ok(Date.now() - started < 30_000, 'did not wait for the sleep');
  });

  test('KUBERNETES_EXEC_INFO, env and args: the request says non-interactive, and carries the cluster with provideClusterInfo', async () => {
    reset();
    const file = join(dir, 'kubeconfig');
    const b64 = (text: string) => Buffer.from(text).toString('base64');
    writeFileSync(
      file,
      `clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: ${b64(pki.caCert)}
    tls-server-name: kube.internal
    proxy-url: http://proxy.internal:3128
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {audience: kproxy, region: eu-1}
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
users:
- name: u
  user:
    exec:
      apiVersion: ${V1}
      command: ${plugin}
      args: [--cluster, prod]
      env: [{name: PLUGIN_GREETING, value: hello}]
      interactiveMode: IfAvailable
      provideClusterInfo: true
`,
    );
    const loaded = await loadKubeconfig([file], {
      env: { INHERITED: 'from-daemon', PATH: process.env.PATH },
    });
    assert.ok(loaded.ok, JSON.stringify(loaded));
    assert.equal(await loaded.connection.tokenSource?.token(), 'tok-1');
    assert.equal(readFileSync(join(dir, 'seen'), 'utf8'), 'hello|--cluster prod|from-daemon');
    const info = JSON.parse(readFileSync(join(dir, 'info.json'), 'utf8'));
    assert.deepEqual(info, {
      apiVersion: V1,
      kind: 'ExecCredential',
      spec: {
        // IfAvailable behaves as Never: kproxy never hands the plugin a terminal.
        interactive: false,
        cluster: {
          server: 'https://10.0.0.1:6443',
          'tls-server-name': 'kube.internal',
          'certificate-authority-data': b64(pki.caCert),
          'proxy-url': 'http://proxy.internal:3128',
          config: { audience: 'kproxy', region: 'eu-1' },
        },
      },
    });

    // Without provideClusterInfo the request holds no cluster; a token in the kubeconfig is used instead of a plugin.
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace('provideClusterInfo: true', 'provideClusterInfo: false'),
    );
    const plain = await loadKubeconfig([file], { env: { PATH: process.env.PATH } });
    assert.ok(plain.ok);
    await plain.connection.tokenSource?.token();
    assert.deepEqual(JSON.parse(readFileSync(join(dir, 'info.json'), 'utf8')).spec, { interactive: false });
    writeFileSync(file, readFileSync(file, 'utf8').replace('    exec:', '    token: static\n    exec:'));
    const withToken = await loadKubeconfig([file]);
    assert.ok(withToken.ok);
    assert.equal(await withToken.connection.tokenSource?.token(), 'static');

    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace('interactiveMode: IfAvailable', 'interactiveMode: Always'),
    );
    const always = await loadKubeconfig([file]);
    assert.ok(!always.ok);
    assert.equal(
      formatConfigError(always.error),
      `${file}: users[0].user.exec.interactiveMode: exec plugin cannot support interactive mode: standard input is not a terminal`,
    );
  });

  test('against the API server: list and watch with the plugin token, refreshed before expiry and after a 401', async () => {
    reset();
    const server = await startApiServer({ tokens: ['tok-1'], bookmarkIntervalMs: 60_000 });
    const expiry = Date.parse('2030-01-01T00:00:00Z');
    writeFileSync(join(dir, 'expiry'), '2030-01-01T00:00:00Z');
    let now = expiry - 3_600_000;
    const execPlugin = new ExecCredentialPlugin(execConfig(plugin), {
      env: { PATH: process.env.PATH },
      now: () => now,
    });
    const client = new KubeClient({ server: server.url, tokenSource: execPlugin.tokenSource() });
    const tokensSent = () => server.requests.map((r) => r.authorization);
    try {
      // Two requests at once with nothing cached run the plugin once.
      const [first, second] = await Promise.all([client.list(SERVICES, {}), client.list(SERVICES, {})]);
      assert.ok(first.ok && second.ok, JSON.stringify([first, second]));
      assert.equal(runs(dir), 1);

      const watch = await client.watch(SERVICES, {
        resourceVersion: first.value.resourceVersion,
        timeoutSeconds: 30,
        allowWatchBookmarks: false,
      });
      assert.ok(watch.ok);
      server.state.apply(SERVICES, sampleService('default', 'web'));
      const iterator = watch.value[Symbol.asyncIterator]();
      const event = (await iterator.next()).value as WatchItem;
      assert.equal(event.kind === 'event' && event.type, 'ADDED');
      await iterator.return?.();
      assert.equal(runs(dir), 1, 'the cached token served the watch');

      // Shortly before expiry the plugin runs again, before the server has to refuse anything.
      server.setTokens(['tok-2']);
      writeFileSync(join(dir, 'expiry'), '2031-01-01T00:00:00Z');
      now = expiry - 5_000;
      const beforeExpiry = server.requests.length;
      assert.ok((await client.list(SERVICES, {})).ok);
      assert.equal(runs(dir), 2);
      assert.deepEqual(tokensSent().slice(beforeExpiry), ['Bearer tok-2']);

      // Revoked before its expiry: the 401 makes the plugin run again, and the request is retried once.
      server.setTokens(['tok-3']);
      const beforeRevoke = server.requests.length;
      assert.ok((await client.list(SERVICES, {})).ok);
      assert.equal(runs(dir), 3);
      assert.deepEqual(tokensSent().slice(beforeRevoke), ['Bearer tok-2', 'Bearer tok-3']);
    } finally {
      await client.close();
      await server.stop();
    }
  });

  test('an informer on the plugin token syncs, and carries on after the token is revoked', async (t) => {
    reset();
    const server = await startApiServer({ tokens: ['tok-1'], bookmarkIntervalMs: 60_000 });
    for (let i = 0; i < 3; i++) server.state.apply(SERVICES, sampleService('ns', `s${i}`));
    const execPlugin = new ExecCredentialPlugin(execConfig(plugin), { env: {} });
    const ti = startTestInformer<Service>(server, SERVICES, {
      connection: { tokenSource: execPlugin.tokenSource() },
    });
    t.after(async () => {
      await ti.close();
      await server.stop();
    });
    await ti.informer.waitForSync();
    assert.equal(ti.informer.store.size, 3);
    assert.equal(runs(dir), 1);

    // Revoked and cut off: the informer's next request gets a 401, the plugin runs, it resumes.
    server.setTokens(['tok-2']);
    server.faults.dropWatches();
    server.state.apply(SERVICES, sampleService('ns', 'after-rotation'));
    await eventually(() => assert.deepEqual(storeContents(ti.informer), expectedStore(server, SERVICES)));
    assert.equal(runs(dir), 2);
  });

  test('a v1beta1 plugin gets a v1beta1 request and must answer in v1beta1', async () => {
    reset();
    const beta = new ExecCredentialPlugin(
      execConfig(plugin, { apiVersion: V1BETA1, env: [{ name: 'API_VERSION', value: V1BETA1 }] }),
      { env: {} },
    );
    assert.deepEqual(await beta.credentials(), { token: 'tok-1' });
    assert.equal(JSON.parse(readFileSync(join(dir, 'info.json'), 'utf8')).apiVersion, V1BETA1);
  });

  test('a plugin failure comes back from the client as a credentials error naming the plugin', async () => {
    const failing = join(dir, 'failing.sh');
    const server = await startApiServer({ tokens: ['x'] });
    const execPlugin = new ExecCredentialPlugin(execConfig(failing), { env: {} });
    const client = new KubeClient({ server: server.url, tokenSource: execPlugin.tokenSource() });
    try {
      const result = await client.list(SERVICES, {});
      assert.ok(!result.ok);
      assert.equal(result.error.kind, 'credentials');
      assert.match(result.error.message, /exec: executable .*failing\.sh failed with exit code 3/);
    } finally {
      await client.close();
      await server.stop();
    }
  });

  test('a plugin that returns a client certificate: the API server (requiring one) accepts it', async () => {
    reset();
    writeFileSync(
      join(dir, 'out.json'),
      JSON.stringify({
        apiVersion: V1,
        kind: 'ExecCredential',
        status: { clientCertificateData: pki.clientCert, clientKeyData: pki.clientKey },
      }),
    );
    const server = await startApiServer({
      tls: { cert: pki.serverCert, key: pki.serverKey, clientCa: pki.caCert },
    });
    const execPlugin = new ExecCredentialPlugin(execConfig(plugin), { env: {} });
    const client = new KubeClient({
      server: server.url,
      ca: pki.caCert,
      tokenSource: execPlugin.tokenSource(),
      certSource: execPlugin.certSource(),
    });
    try {
      const result = await client.list(SERVICES, {});
      assert.ok(result.ok, JSON.stringify(result));
      assert.equal(runs(dir), 1);
      assert.equal(
        server.requests.at(-1)?.authorization,
        undefined,
        'no bearer token, the certificate did it',
      );
    } finally {
      await client.close();
      await server.stop();
    }
  });
});
