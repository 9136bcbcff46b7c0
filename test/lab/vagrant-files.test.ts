// The Vagrant lab cannot boot here (no VMs with a network), so what can be checked without it is:
// every script parses, the Vagrantfile is valid Ruby, and the pieces agree with each other.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { ECHO_TCP_PORT, ECHO_UDP_PORT } from '../../lab/driver.ts';

const VAGRANT = fileURLToPath(new URL('../../vagrant/', import.meta.url));
const scripts = [
  join(VAGRANT, 'run-scenarios.sh'),
  ...readdirSync(join(VAGRANT, 'provision'))
    .filter((f) => f.endsWith('.sh'))
    .map((f) => join(VAGRANT, 'provision', f)),
];

function hasCommand(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('Vagrant lab files', () => {
  test('every shell script parses (bash -n)', () => {
    assert.ok(scripts.length >= 5, `found ${scripts.length} scripts`);
    for (const script of scripts) execFileSync('bash', ['-n', script]);
  });

  test('the Vagrantfile is valid Ruby (ruby -c)', (t) => {
    if (!hasCommand('ruby')) {
      const reason = 'needs ruby: install it to check the Vagrantfile syntax';
      process.stderr.write(`SKIPPED ${t.name}: ${reason}\n`);
      t.skip(reason);
      return;
    }
    assert.match(
      execFileSync('ruby', ['-c', join(VAGRANT, 'Vagrantfile')], { encoding: 'utf8' }),
      /Syntax OK/,
    );
  });

  test('every provisioning script the Vagrantfile names exists', () => {
    const vagrantfile = readFileSync(join(VAGRANT, 'Vagrantfile'), 'utf8');
    const named = [...vagrantfile.matchAll(/"(provision\/[\w.-]+\.sh)"/g)].map((m) => m[1]!);
    assert.deepEqual([...new Set(named)].sort(), [
      'provision/common.sh',
      'provision/control-plane.sh',
      'provision/kproxy.sh',
      'provision/worker.sh',
    ]);
    for (const path of named) assert.ok(existsSync(join(VAGRANT, path)), path);
  });

  test('kubeadm skips kube-proxy: kproxy must be the only proxy', () => {
    const script = readFileSync(join(VAGRANT, 'provision/control-plane.sh'), 'utf8');
    assert.match(script, /kubeadm init .*--skip-phases=addon\/kube-proxy/);
  });

  test('the echo pods listen where the lab drivers connect, and run the checkout echo server', () => {
    const docs = parseAllDocuments(readFileSync(join(VAGRANT, 'manifests/echo-pods.yaml'), 'utf8')).map(
      (d) => d.toJS() as { spec: { template: { spec: { containers: Record<string, unknown>[] } } } },
    );
    assert.equal(docs.length, 2, 'two DaemonSets: two pods per worker');
    for (const doc of docs) {
      const [container] = doc.spec.template.spec.containers;
      assert.deepEqual(container?.command, ['node', '/lab/echo-server.ts']);
      assert.deepEqual(container?.args, [
        '$(POD_NAME)',
        '--tcp',
        String(ECHO_TCP_PORT),
        '--udp',
        String(ECHO_UDP_PORT),
      ]);
    }
  });
});
