import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeTestPki, type TestPki } from '../../harness/apiserver/certs.ts';
import { type StandInApiServer, startApiServer } from '../../harness/apiserver/server.ts';
import { KubeClient } from '../../src/kube/client.ts';
import { loadKubeconfig } from '../../src/kube/kubeconfig.ts';
import { noProxyMatches, proxyFor } from '../../src/kube/proxy-env.ts';
import { SERVICES } from '../../src/kube/resources.ts';

describe('which proxy (client-go / Go ProxyFromEnvironment rules)', () => {
  const https = new URL('https://api.example.com:6443');
  test('proxy-url wins; HTTPS_PROXY for https, HTTP_PROXY for http, upper case first', () => {
    const env = {
      HTTPS_PROXY: 'http://upper:1',
      https_proxy: 'http://lower:1',
      HTTP_PROXY: 'http://plain:1',
    };
    assert.equal(proxyFor(https, 'socks5://from-kubeconfig:1080', env), 'socks5://from-kubeconfig:1080');
    assert.equal(proxyFor(https, undefined, env), 'http://upper:1');
    assert.equal(proxyFor(https, undefined, { https_proxy: 'http://lower:1' }), 'http://lower:1');
    assert.equal(
      proxyFor(https, undefined, { HTTP_PROXY: 'http://plain:1' }),
      undefined,
      'no HTTPS_PROXY: direct',
    );
    assert.equal(proxyFor(new URL('http://api.example.com'), undefined, env), 'http://plain:1');
    assert.equal(
      proxyFor(https, undefined, { HTTPS_PROXY: 'squid.internal:3128' }),
      'http://squid.internal:3128',
    );
    assert.equal(proxyFor(https, undefined, {}), undefined);
  });

  test('localhost and loopback addresses never go through an environment proxy (proxy-url still applies)', () => {
    const env = { HTTPS_PROXY: 'http://p:1' };
    for (const server of [
      'https://localhost:6443',
      'https://127.0.0.1:6443',
      'https://127.9.9.9',
      'https://[::1]:6443',
    ])
      assert.equal(proxyFor(new URL(server), undefined, env), undefined, server);
    assert.equal(proxyFor(new URL('https://127.0.0.1:6443'), 'http://p:2', env), 'http://p:2');
  });

  test('NO_PROXY: *, names with their subdomains, .subdomains only, IPs, CIDRs, ports', () => {
    const cases: [string, string, string, boolean][] = [
      ['*', 'api.example.com', '443', true],
      ['example.com', 'example.com', '443', true],
      ['example.com', 'api.example.com', '443', true],
      ['example.com', 'notexample.com', '443', false],
      ['.example.com', 'example.com', '443', false],
      ['.example.com', 'api.example.com', '443', true],
      ['*.example.com', 'api.example.com', '443', true],
      ['other.org, EXAMPLE.com', 'api.example.com', '443', true],
      ['example.com:6443', 'api.example.com', '6443', true],
      ['example.com:6443', 'api.example.com', '443', false],
      ['10.0.0.1', '10.0.0.1', '443', true],
      ['10.0.0.1', '10.0.0.2', '443', false],
      ['10.96.0.0/12', '10.100.3.4', '443', true],
      ['10.96.0.0/12', '10.112.0.1', '443', false],
      ['fd00::/8', 'fd00::1', '443', true],
      ['[fd00::1]:6443', 'fd00::1', '6443', true],
      ['fd00::1', 'fd00::1', '443', true],
      ['', 'api.example.com', '443', false],
    ];
    for (const [noProxy, host, port, expected] of cases)
      assert.equal(noProxyMatches(noProxy, host, port), expected, `${noProxy} vs ${host}:${port}`);
    assert.equal(
      proxyFor(new URL('https://api.example.com'), undefined, {
        HTTPS_PROXY: 'http://p:1',
        no_proxy: 'example.com',
      }),
      undefined,
    );
  });
});

/** A CONNECT proxy on loopback that tunnels every host to 127.0.0.1 (same port) and records the tunnels. */
async function startConnectProxy(): Promise<{ url: string; tunnels: string[]; close(): Promise<void> }> {
  const tunnels: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = http.createServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    tunnels.push(req.url ?? '');
    const port = Number((req.url ?? '').split(':').pop());
    const upstream = net.connect(port, '127.0.0.1', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    tunnels,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('KubeClient through a real CONNECT proxy', () => {
  let pki: TestPki;
  let api: StandInApiServer;
  let proxy: Awaited<ReturnType<typeof startConnectProxy>>;
  let port: string;
  let dir: string;
  before(async () => {
    pki = makeTestPki();
    api = await startApiServer({ tls: { cert: pki.serverCert, key: pki.serverKey }, tokens: ['secret'] });
    port = new URL(api.url).port;
    proxy = await startConnectProxy();
    dir = mkdtempSync(join(tmpdir(), 'kproxy-proxy-'));
  });
  after(async () => {
    await proxy.close();
    await api.stop();
    pki.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  // kube.test resolves nowhere: only the proxy (which maps every host to loopback) can reach it, so a
  // request that succeeds went through the proxy, and one that went direct fails to resolve.
  const viaName = () => ({
    server: `https://kube.test:${port}`,
    ca: pki.caCert,
    tlsServerName: 'localhost',
    tokenSource: { token: async () => 'secret', invalidate: () => {} },
  });

  test('HTTPS_PROXY from the environment carries lists (its tunnels go to the server)', async () => {
    const before = proxy.tunnels.length;
    const client = new KubeClient(viaName(), { env: { HTTPS_PROXY: proxy.url } });
    try {
      assert.equal(client.proxy, `${proxy.url}/`);
      assert.ok((await client.list(SERVICES, {})).ok);
      assert.ok((await client.list(SERVICES, {})).ok);
      const made = proxy.tunnels.slice(before);
      assert.ok(made.length >= 1, 'went through the proxy');
      assert.deepEqual(new Set(made), new Set([`kube.test:${port}`]));
    } finally {
      await client.close();
    }
  });

  test('a host NO_PROXY matches goes direct', async () => {
    const before = proxy.tunnels.length;
    const client = new KubeClient(viaName(), { env: { https_proxy: proxy.url, NO_PROXY: '.svc,test' } });
    try {
      assert.equal(client.proxy, undefined);
      const result = await client.list(SERVICES, {});
      assert.ok(!result.ok);
      assert.equal(result.error.kind, 'network');
      assert.match(result.error.message, /ENOTFOUND|EAI_AGAIN/, 'tried to resolve kube.test itself');
      assert.equal(proxy.tunnels.length, before);
    } finally {
      await client.close();
    }
  });

  test("the kubeconfig's proxy-url wins over HTTPS_PROXY, and applies to a loopback server too", async () => {
    const file = join(dir, 'kubeconfig');
    writeFileSync(
      file,
      `clusters:
- name: c
  cluster:
    server: https://127.0.0.1:${port}
    certificate-authority: ${pki.files.caCert}
    proxy-url: ${proxy.url}
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
users: [{name: u, user: {token: secret}}]
`,
    );
    const loaded = await loadKubeconfig([file]);
    assert.ok(loaded.ok, JSON.stringify(loaded));
    const before = proxy.tunnels.length;
    // The environment's proxy is a closed port: using it would fail the request.
    const client = new KubeClient(loaded.connection, { env: { HTTPS_PROXY: 'http://127.0.0.1:1' } });
    try {
      const result = await client.list(SERVICES, {});
      assert.ok(result.ok, JSON.stringify(result));
      assert.deepEqual(proxy.tunnels.slice(before), [`127.0.0.1:${port}`]);
    } finally {
      await client.close();
    }

    // And without proxy-url, the same loopback server is reached directly despite HTTPS_PROXY.
    const direct = new KubeClient({ ...loaded.connection, proxyUrl: undefined } as typeof loaded.connection, {
      env: { HTTPS_PROXY: 'http://127.0.0.1:1' },
    });
    try {
      assert.ok((await direct.list(SERVICES, {})).ok);
    } finally {
      await direct.close();
    }
  });
});
