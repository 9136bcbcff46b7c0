// The Vagrant lab cannot boot here (no VMs with a network), so what can be checked without it is:
// Vagrant accepts the Vagrantfile, kubeadm's configuration is the one the chosen Kubernetes release
// reads, and the pieces agree with each other. Every script's parse and shellcheck:
// test/scripts/shell-scripts.test.ts.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { parseAllDocuments } from 'yaml';
import { ECHO_TCP_PORT, ECHO_UDP_PORT } from '../../lab/driver.ts';
import { skipWithout } from '../support/host-tools.ts';

const VAGRANT = fileURLToPath(new URL('../../vagrant/', import.meta.url));
const vagrantfile = readFileSync(join(VAGRANT, 'Vagrantfile'), 'utf8');

/** A constant of the Vagrantfile: NAME = "value", or its default in NAME = ENV.fetch("NAME", "value"). */
function vagrantfileConstant(name: string): string {
  const match = new RegExp(`^${name} = (?:ENV\\.fetch\\("${name}", )?"([^"]*)"`, 'm').exec(vagrantfile);
  assert.ok(match, `${name} in the Vagrantfile`);
  return match[1]!;
}

/** lab.env's NAME=value lines. */
function labEnv(): Record<string, string> {
  const text = readFileSync(join(VAGRANT, 'provision/lab.env'), 'utf8');
  return Object.fromEntries([...text.matchAll(/^(\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** This process's environment without the lab's own variables, which the tests set themselves. */
function environmentWithoutLabSettings(): NodeJS.ProcessEnv {
  const { KPROXY_MODE: _mode, K8S_MINOR: _minor, ...rest } = process.env;
  return rest;
}

/**
 * `vagrant validate` on a Vagrant directory with libvirt as the provider: Vagrant's state and home
 * in a scratch directory (nothing written to the checkout), the lab's own variables only as given.
 */
async function vagrantValidate(
  dir: string,
  env: Record<string, string> = {},
): Promise<{ ok: boolean; output: string }> {
  const scratch = await mkdtemp(join(tmpdir(), 'kproxy-vagrant-validate-'));
  try {
    const result = await execa('vagrant', ['validate'], {
      cwd: dir,
      env: {
        ...environmentWithoutLabSettings(),
        VAGRANT_HOME: join(scratch, 'home'),
        VAGRANT_DOTFILE_PATH: join(scratch, 'dot'),
        VAGRANT_DEFAULT_PROVIDER: 'libvirt',
        VAGRANT_CHECKPOINT_DISABLE: '1',
        ...env,
      },
      extendEnv: false,
      reject: false,
      all: true,
    });
    return { ok: result.exitCode === 0, output: result.all ?? '' };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

describe('Vagrant lab files', () => {
  test('vagrant validate accepts the Vagrantfile, the libvirt provider settings included', async (t) => {
    if (skipWithout(t, ['vagrant'], 'apt-get install --no-install-recommends vagrant vagrant-libvirt'))
      return;
    // The same Vagrantfile with a misspelt libvirt setting must be refused: else the provider's
    // settings were not checked at all (no vagrant-libvirt).
    const copy = await mkdtemp(join(tmpdir(), 'kproxy-vagrant-copy-'));
    t.after(() => rm(copy, { recursive: true, force: true }));
    await cp(VAGRANT, copy, { recursive: true, filter: (source) => !source.includes('/.vagrant') });
    const misspelt = vagrantfile.replace('lv.cpus =', 'lv.cpuz =');
    assert.notEqual(misspelt, vagrantfile, 'the Vagrantfile sets lv.cpus');
    await writeFile(join(copy, 'Vagrantfile'), misspelt);
    const [lab, badMinor, broken] = await Promise.all([
      vagrantValidate(VAGRANT),
      vagrantValidate(VAGRANT, { K8S_MINOR: '1.37' }),
      vagrantValidate(copy),
    ]);
    assert.ok(lab.ok, lab.output);
    assert.ok(!badMinor.ok && badMinor.output.includes('K8S_MINOR=1.37:'), badMinor.output);
    if (broken.ok) {
      process.stderr.write(`SKIPPED the libvirt half of ${t.name}: vagrant-libvirt is not installed\n`);
      return;
    }
    assert.match(broken.output, /cpuz/);
  });

  test('the Vagrantfile refuses a mode or Kubernetes minor the lab cannot run, before any VM boots', (t) => {
    if (skipWithout(t, ['ruby'], 'apt-get install ruby')) return;
    // The checks run as the Vagrantfile loads, before Vagrant.configure: plain Ruby runs them
    // (in a fraction of vagrant's seconds), with a Vagrant.configure that does nothing. Loading
    // the whole file, this is also its syntax check where vagrant is not installed.
    const load = (env: Record<string, string>) => {
      const stub = 'module Vagrant; def self.configure(_version); end; end; load ARGV[0]';
      const result = spawnSync('ruby', ['-e', stub, join(VAGRANT, 'Vagrantfile')], {
        env: { ...environmentWithoutLabSettings(), ...env },
        encoding: 'utf8',
      });
      return { ok: result.status === 0, output: result.stderr };
    };
    for (const [env, refusal] of [
      [{ K8S_MINOR: '1.37' }, 'K8S_MINOR=1.37:'],
      [{ K8S_MINOR: 'v1.30' }, 'K8S_MINOR=v1.30:'], // kubeadm before 1.31 cannot read v1beta4
      [{ K8S_MINOR: 'v1.37.2' }, 'K8S_MINOR=v1.37.2:'], // a minor, not a patch release
      [{ KPROXY_MODE: 'ebpf' }, 'KPROXY_MODE=ebpf:'],
    ] as const) {
      const result = load(env);
      assert.ok(!result.ok && result.output.includes(refusal), `${JSON.stringify(env)}: ${result.output}`);
    }
    const accepted: Record<string, string>[] = [
      {},
      { K8S_MINOR: 'v1.31' },
      { K8S_MINOR: 'v1.38', KPROXY_MODE: 'ipvs' },
    ];
    for (const env of accepted) {
      const result = load(env);
      assert.ok(result.ok, `${JSON.stringify(env)}: ${result.output}`);
    }
  });

  test('each node is provisioned in order: common, containerd, kubeadm, kproxy; every script exists', () => {
    const provisioners = [
      ...vagrantfile.matchAll(/node\.vm\.provision "(\w+)", type: "shell", path: (\S+),/g),
    ];
    assert.deepEqual(
      provisioners.map((m) => m[1]),
      ['common', 'containerd', 'kubeadm', 'kproxy'],
    );
    const paths = [...vagrantfile.matchAll(/"(provision\/[\w.-]+\.sh)"/g)].map((m) => m[1]!);
    assert.deepEqual([...new Set(paths)].sort(), [
      'provision/common.sh',
      'provision/containerd.sh',
      'provision/control-plane.sh',
      'provision/kproxy.sh',
      'provision/worker.sh',
    ]);
    for (const path of paths) assert.ok(existsSync(join(VAGRANT, path)), path);
  });

  test('the default Kubernetes minor is a supported one, and its runtime requirement is met', () => {
    const minor = /^v1\.(\d+)$/.exec(vagrantfileConstant('K8S_MINOR'));
    assert.ok(minor, 'K8S_MINOR is v1.NN');
    assert.ok(Number(minor[1]) >= 36, `v1.${minor[1]}: Kubernetes supports its newest three minors`);
    // Kubernetes 1.36 and later support containerd 2.x only.
    const containerdMajor = Number(vagrantfileConstant('CONTAINERD_VERSION').split('.')[0]);
    assert.ok(containerdMajor >= 2, `containerd ${vagrantfileConstant('CONTAINERD_VERSION')}`);
    assert.match(vagrantfileConstant('RUNC_VERSION'), /^\d+\.\d+\.\d+$/);
    assert.match(vagrantfile, /"CONTAINERD_VERSION" => CONTAINERD_VERSION,/);
    assert.match(vagrantfile, /"RUNC_VERSION" => RUNC_VERSION,/);
  });

  test("kubelet, kubeadm and kubectl come from K8S_MINOR's own pkgs.k8s.io repository and key", async () => {
    const script = await readFile(join(VAGRANT, 'provision/common.sh'), 'utf8');
    const repository = `https://pkgs.k8s.io/core:/stable:/\${K8S_MINOR}/deb/`;
    assert.ok(script.includes(`curl -fsSL "${repository}Release.key"`), 'the signing key of that minor');
    assert.ok(script.includes(`deb [signed-by=$keyring] ${repository} /`), 'the repository of that minor');
  });

  test('kubeadm init reads a v1beta4 configuration that leaves kube-proxy out and lets kproxy in', async () => {
    const script = await readFile(join(VAGRANT, 'provision/control-plane.sh'), 'utf8');
    const heredoc = /cat >(\S+kubeadm\.yaml) <<CONF\n([\s\S]*?)\nCONF\n/.exec(script);
    assert.ok(heredoc, 'the kubeadm configuration file');
    assert.match(script, new RegExp(`kubeadm init --config ${heredoc[1]!.replaceAll('/', '\\/')}\\n`));
    const values: Record<string, string> = {
      ...labEnv(),
      NODE_IP: '192.168.56.10',
      kubernetes_version: 'v1.37.1',
    };
    const text = heredoc[2]!.replace(/\$\{(\w+)\}/g, (_, name: string) => {
      assert.ok(name in values, `\${${name}} is set`);
      return values[name]!;
    });
    const docs = parseAllDocuments(text).map((d) => d.toJS() as Record<string, unknown>);
    // kubeadm 1.37 reads nothing older; v1beta3's string maps would be refused.
    for (const doc of docs) assert.equal(doc.apiVersion, 'kubeadm.k8s.io/v1beta4', String(doc.kind));
    const cluster = docs.find((d) => d.kind === 'ClusterConfiguration') as {
      kubernetesVersion: string;
      proxy?: { disabled?: boolean };
      networking: { serviceSubnet: string };
      apiServer: {
        extraArgs: { name: string; value: string }[];
        extraVolumes: { hostPath: string; mountPath: string }[];
      };
    };
    assert.deepEqual(cluster.proxy, { disabled: true });
    assert.equal(cluster.kubernetesVersion, 'v1.37.1', "the installed kubeadm's version");
    assert.match(script, /kubernetes_version="\$\(kubeadm version -o short\)"/);
    assert.equal(cluster.networking.serviceSubnet, labEnv().SERVICE_CIDR);
    assert.ok(Array.isArray(cluster.apiServer.extraArgs), 'extraArgs is a list of {name, value}');
    const tokenFile = cluster.apiServer.extraArgs.find((a) => a.name === 'token-auth-file')?.value;
    assert.ok(tokenFile, 'the API server reads the lab token file');
    assert.ok(script.includes(`>${tokenFile}\n`), 'the script writes that file');
    assert.ok(
      cluster.apiServer.extraVolumes.some((v) => tokenFile.startsWith(`${v.mountPath}/`)),
      'and the API server pod mounts it',
    );
    const init = docs.find((d) => d.kind === 'InitConfiguration') as {
      bootstrapTokens: { token: string }[];
    };
    assert.equal(init.bootstrapTokens[0]?.token, labEnv().BOOTSTRAP_TOKEN, 'the token workers join with');
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
