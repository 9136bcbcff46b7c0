// `kproxy render` of Services that claim one address (issue 10): two cluster IPs spelled
// differently (010.1.1.1, 10.1.1.01) gave a stack trace, and an external IP equal to another
// Service's cluster IP made nftables fail. Now every mode renders, and the loser is a warning.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { captureIO } from './capture-io.ts';

const service = (name: string, created: string, spec: Record<string, unknown>) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'default', creationTimestamp: created },
  spec: { type: 'ClusterIP', ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...spec },
});
const CLUSTER = JSON.stringify({
  apiVersion: 'v1',
  kind: 'List',
  items: [
    service('a', '2025-01-01T00:00:00Z', { clusterIP: '010.1.1.1' }),
    service('b', '2025-02-01T00:00:00Z', { clusterIP: '10.1.1.01' }),
    service('c', '2025-01-01T00:00:00Z', { clusterIP: '10.1.1.3' }),
    service('d', '2025-03-01T00:00:00Z', { clusterIP: '10.1.1.4', externalIPs: ['10.1.1.3'] }),
  ],
});

let dir = '';
let input = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kproxy-conflicts-'));
  input = join(dir, 'cluster.json');
  await writeFile(input, CLUSTER);
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

for (const mode of ['nftables', 'iptables', 'ipvs']) {
  test(`render --mode ${mode}: conflicting Services render, the newer one is a warning naming both`, async () => {
    const captured = captureIO('');
    const argv = ['render', '--mode', mode, '--input', input, '--node', 'node-1', '--node-ip', '192.168.1.1'];
    const code = await main(argv, captured.io);
    const stderr = captured.stderr();
    assert.equal(code, 0, stderr);
    assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
    const warnings = stderr.split('\n').filter((line) => line.startsWith('warning: '));
    assert.equal(warnings.length, 2, stderr);
    assert.match(stderr, /Service default\/b.*cluster IP 10\.1\.1\.1:80\/TCP .*Service default\/a/);
    assert.match(
      stderr,
      /Service default\/d.*external IP 10\.1\.1\.3:80\/TCP .*cluster IP of Service default\/c/,
    );
    // The newer Service keeps the rest: d's own cluster IP is served; c's is c's alone.
    const stdout = captured.stdout();
    assert.match(stdout, /10\.1\.1\.4/);
    const cLines = stdout.split('\n').filter((line) => /\b10\.1\.1\.3\b/.test(line));
    assert.ok(cLines.length > 0);
    for (const line of cLines) assert.doesNotMatch(line, /default\/d/);
  });
}
