// The OCI image (scripts/image.sh) run as deploy/daemonset.yaml runs it: the image built from the
// package, unpacked by umoci into a runtime bundle and run by runc with what the manifest gives its
// container, read out of it: the command ($(NODE_NAME) expanded as the kubelet expands it), the
// environment, the volumes (deploy/configmap.yaml's ConfigMap, its kubeconfig's server set to the
// stand-in API server as its comment says; the hostPaths), privileged, and the host's network: a
// lab node's namespace stands in for the node's. The kubelet's part is the service account's token
// and CA, mounted where it mounts them. The daemon syncs its rules into that namespace and serves
// /healthz, and the Service answers from its pod, on its cluster IP and on the node's address (a
// NodePort for local endpoints only: its endpoint is local when kproxy runs under the node name
// the manifest passes); without CAP_NET_ADMIN, which nothing else grants it, it does not. The
// image's own entrypoint (a one-off pod's, `ctr run`'s) runs kproxy.
// Slow (the package, then the image: a minute on a kept Debian root, minutes when image.sh makes
// that root again, every week): it runs in the test script's second lane. Skipped LOUDLY without
// root, mmdebstrap, umoci or runc.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { parse } from 'yaml';
import { makeTestPki } from '../../harness/apiserver/certs.ts';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { Topology } from '../../harness/topology.ts';
import { ENDPOINT_SLICES, NODES, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';
import { buildPackage, standInApiServer, withKeptRoot } from './debian-machine.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const IMAGE_SH = join(REPO, 'scripts/image.sh');
const NODE_NAME = 'node-0';
const CLUSTER_IP = '10.96.0.10';
/** Where the kubelet mounts a pod's service-account token and CA. */
const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** kube-proxy's health port, kproxy's default healthzBindAddress (the ConfigMap sets none). */
const HEALTHZ = 'http://127.0.0.1:10256/healthz';
/** The web Service's node port. */
const NODE_PORT = 30080;
/** The first sync of one service, plus Node's start-up and the informers' lists. */
const SYNC_DEADLINE_MS = 60_000;

interface ServiceSpec {
  type: string;
  externalTrafficPolicy?: string;
  ports: Record<string, unknown>[];
}
interface EnvVar {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { readonly fieldRef?: { readonly fieldPath: string } };
}
interface Container {
  readonly command: readonly string[];
  readonly env?: readonly EnvVar[];
  readonly securityContext?: { readonly privileged?: boolean };
  readonly volumeMounts?: readonly { name: string; mountPath: string; readOnly?: boolean }[];
}
interface Volume {
  readonly name: string;
  readonly configMap?: { readonly name: string };
  readonly hostPath?: { readonly path: string; readonly type?: string };
}
interface PodSpec {
  readonly hostNetwork?: boolean;
  readonly containers: readonly Container[];
  readonly volumes?: readonly Volume[];
}
/** The parts of an OCI runtime config (runtime-spec config.json) this test sets. */
interface RuntimeConfig {
  process: {
    args: string[];
    env: string[];
    terminal: boolean;
    noNewPrivileges?: boolean;
    capabilities: Record<'bounding' | 'effective' | 'permitted' | 'ambient' | 'inheritable', string[]>;
  };
  mounts: { destination: string; type: string; source: string; options: string[] }[];
  linux: {
    namespaces: { type: string; path?: string }[];
    seccomp?: unknown;
    maskedPaths?: string[];
    readonlyPaths?: string[];
  };
}

/** What the kubelet gives this node's pod besides the manifest: where its volumes come from. */
interface Node {
  readonly name: string;
  readonly netns: string;
  /** The node's filesystem, for the pod's hostPaths (this machine may have no /lib/modules). */
  readonly root: string;
  /** ConfigMap name → the directory holding its data, one file per key. */
  readonly configMaps: ReadonlyMap<string, string>;
  readonly serviceAccountDir: string;
  /** Every capability the runtime holds: what a privileged container gets. */
  readonly allCapabilities: readonly string[];
}

/** $(VAR) references in a command, expanded from the container's environment as the kubelet does. */
function expand(arg: string, env: ReadonlyMap<string, string>): string {
  return arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env.get(name) ?? whole);
}

/** The runtime config for the pod's one container on `node`, from the image's `base` config. */
function runtimeConfig(base: RuntimeConfig, pod: PodSpec, node: Node): RuntimeConfig {
  assert.equal(pod.containers.length, 1, 'the DaemonSet runs one container');
  const container = pod.containers[0]!;
  const env = new Map<string, string>();
  for (const variable of container.env ?? []) {
    const field = variable.valueFrom?.fieldRef?.fieldPath;
    if (variable.value !== undefined) env.set(variable.name, variable.value);
    else if (field === 'spec.nodeName') env.set(variable.name, node.name);
    else throw new Error(`deploy/daemonset.yaml: env ${variable.name}: no value this test can give`);
  }
  const config: RuntimeConfig = structuredClone(base);
  config.process.args = container.command.map((arg) => expand(arg, env));
  config.process.env = [...config.process.env, ...[...env].map(([name, value]) => `${name}=${value}`)];
  config.process.terminal = false;
  if (container.securityContext?.privileged) {
    // A privileged container: every capability, no seccomp filter, nothing masked or read-only.
    for (const set of Object.keys(
      config.process.capabilities,
    ) as (keyof RuntimeConfig['process']['capabilities'])[]) {
      config.process.capabilities[set] = [...node.allCapabilities];
    }
    config.process.noNewPrivileges = false;
    delete config.linux.seccomp;
    config.linux.maskedPaths = [];
    config.linux.readonlyPaths = [];
    for (const mount of config.mounts) {
      if (mount.type === 'sysfs') mount.options = mount.options.filter((option) => option !== 'ro');
    }
  }
  if (pod.hostNetwork) {
    config.linux.namespaces = config.linux.namespaces.map((namespace) =>
      namespace.type === 'network' ? { type: 'network', path: `/run/netns/${node.netns}` } : namespace,
    );
  }
  const volumes = new Map((pod.volumes ?? []).map((volume) => [volume.name, volume]));
  for (const mount of container.volumeMounts ?? []) {
    const volume = volumes.get(mount.name);
    let source: string | undefined;
    if (volume?.configMap) source = node.configMaps.get(volume.configMap.name);
    else if (volume?.hostPath) source = join(node.root, volume.hostPath.path);
    if (source === undefined)
      throw new Error(`deploy/daemonset.yaml: volumeMount ${mount.name}: no volume to mount`);
    // The kubelet mounts ConfigMaps read-only.
    const readOnly = mount.readOnly || volume?.configMap !== undefined;
    config.mounts.push({
      destination: mount.mountPath,
      type: 'bind',
      source,
      options: ['rbind', readOnly ? 'ro' : 'rw'],
    });
  }
  config.mounts.push({
    destination: SERVICE_ACCOUNT_DIR,
    type: 'bind',
    source: node.serviceAccountDir,
    options: ['rbind', 'ro'],
  });
  return config;
}

/** The pod's hostPaths under the node's root, made as the kubelet makes them for their types. */
async function makeHostPaths(pod: PodSpec, node: Node): Promise<void> {
  for (const volume of pod.volumes ?? []) {
    const hostPath = volume.hostPath;
    if (!hostPath) continue;
    const path = join(node.root, hostPath.path);
    if (hostPath.type === 'FileOrCreate') {
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, '', { flag: 'a' });
    } else {
      await mkdir(path, { recursive: true });
    }
  }
}

describe('the OCI image as deploy/daemonset.yaml runs it (runc, in a lab node namespace)', () => {
  test('syncs the rules and serves /healthz with the DaemonSet’s privileges, not without NET_ADMIN', {
    timeout: 30 * 60_000,
  }, async (t) => {
    if (!requireRoot(t, 'mmdebstrap, umoci and runc')) return;
    const missing: string[] = [];
    for (const tool of ['mmdebstrap', 'umoci', 'runc']) {
      if ((await execa('sh', ['-c', `command -v ${tool}`], { reject: false })).exitCode !== 0)
        missing.push(tool);
    }
    if (missing.length > 0) {
      const reason = `needs ${missing.join(', ')} (apt-get install mmdebstrap umoci runc)`;
      process.stderr.write(`SKIPPED ${t.name}: ${reason}\n`);
      t.skip(reason);
      return;
    }
    const dir = await mkdtemp(join(tmpdir(), 'kproxy-image-'));
    // In order: the containers gone, the lab's namespaces and processes, the PKI, the files.
    const cleanups: (() => Promise<void>)[] = [() => rm(dir, { recursive: true, force: true })];
    t.after(async () => {
      for (const cleanup of cleanups) await cleanup();
    });

    const deb = await buildPackage(join(dir, 'package'), 'image');
    const started = Date.now();
    // The image's Debian root from a base kept a week (image.sh's own recipe, the package's
    // dependencies installed: no mirror), the package installed into its copy by apt.
    const depends = (await execa('dpkg-deb', ['-f', deb, 'Depends'])).stdout;
    const built = await withKeptRoot(
      'image-base',
      [await readFile(IMAGE_SH, 'utf8'), depends],
      (target) => [IMAGE_SH, '--make-base', target, deb],
      (kept) => [IMAGE_SH, '--base', kept, deb, dir],
    );
    process.stderr.write(
      `image: ${built.stdout.trim()} in ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
    );
    const { version } = JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const layout = join(dir, 'oci');
    await mkdir(layout);
    await execa('tar', ['-xf', join(dir, `kproxy_${version}_amd64.oci.tar`), '-C', layout]);
    const bundle = join(dir, 'bundle');
    await execa('umoci', ['unpack', '--image', `${layout}:${version.replaceAll('+', '_')}`, bundle]);
    const base = JSON.parse(await readFile(join(bundle, 'config.json'), 'utf8')) as RuntimeConfig;
    // The image's own entrypoint, as a one-off pod or `ctr run IMAGE ID ARGS` uses it: kproxy.
    const own = structuredClone(base);
    own.process.args = [...base.process.args, '--version'];
    own.process.terminal = false;
    await writeFile(join(bundle, 'config.json'), JSON.stringify(own));
    const versionRun = await execa('runc', ['run', '--bundle', bundle, `kproxy-version-${process.pid}`], {
      reject: false,
      stdin: 'ignore',
    });
    assert.equal(versionRun.stdout.trim(), `kproxy ${version}`, versionRun.stderr);

    const pod = (
      parse(await readFile(join(REPO, 'deploy/daemonset.yaml'), 'utf8')) as {
        spec: { template: { spec: PodSpec } };
      }
    ).spec.template.spec;
    const configMap = parse(await readFile(join(REPO, 'deploy/configmap.yaml'), 'utf8')) as {
      metadata: { name: string };
      data: Record<string, string>;
    };

    const lab = new Lab('img');
    cleanups.unshift(() => lab.destroy());
    const topo = await Topology.create(lab, { podsPerNode: [1] });
    const labNode = topo.nodes[0]!;
    await topo.startEcho(labNode.pods[0]!, { tcp: [8080] });
    const pki = makeTestPki();
    cleanups.unshift(async () => pki.remove());
    const token = 'kproxy-service-account-token';
    const api = await standInApiServer(lab, labNode.ns, { pki, token });
    await api.post(NODES, sampleNode(NODE_NAME, labNode.ipv4));
    // A NodePort Service for external traffic to local endpoints only: its endpoint is local (on
    // node-0) only when kproxy runs as node-0, the name the manifest passes it.
    const web = sampleService('default', 'web', { clusterIP: CLUSTER_IP }) as { spec: ServiceSpec };
    web.spec.type = 'NodePort';
    web.spec.externalTrafficPolicy = 'Local';
    web.spec.ports = web.spec.ports.map((port) => ({ ...port, nodePort: NODE_PORT }));
    await api.post(SERVICES, web);
    await api.post(
      ENDPOINT_SLICES,
      sampleEndpointSlice('default', 'web-abc', {
        service: 'web',
        addresses: [labNode.pods[0]!.ipv4],
        nodeName: NODE_NAME,
      }),
    );

    // The ConfigMap as the kubelet projects it: a file per key; its server is the stand-in's.
    const configMapDir = join(dir, 'configmap');
    await mkdir(configMapDir);
    for (const [key, value] of Object.entries(configMap.data)) {
      const text = key === 'kubeconfig.conf' ? value.replace(/^(\s*server:).*$/m, `$1 ${api.url}`) : value;
      assert.ok(
        key !== 'kubeconfig.conf' || text.includes(api.url),
        'the ConfigMap’s kubeconfig names a server',
      );
      await writeFile(join(configMapDir, key), text);
    }
    const serviceAccountDir = join(dir, 'serviceaccount');
    await mkdir(serviceAccountDir);
    await writeFile(join(serviceAccountDir, 'token'), token);
    await writeFile(join(serviceAccountDir, 'ca.crt'), pki.caCert);
    const bounding = /^CapBnd:\s+([0-9a-f]+)$/m.exec(await readFile('/proc/self/status', 'utf8'))![1]!;
    const decoded = (await execa('capsh', [`--decode=${bounding}`])).stdout.trim();
    const node: Node = {
      name: NODE_NAME,
      netns: labNode.ns,
      root: join(dir, 'node'),
      configMaps: new Map([[configMap.metadata.name, configMapDir]]),
      serviceAccountDir,
      allCapabilities: decoded
        .split('=')[1]!
        .split(',')
        .map((name) => name.toUpperCase()),
    };
    await makeHostPaths(pod, node);
    const manifest = runtimeConfig(base, pod, node);
    assert.ok(manifest.process.capabilities.bounding.includes('CAP_NET_ADMIN'));

    const kproxyTables = async () =>
      (await lab.exec(labNode.ns, 'nft', ['list', 'tables'])).stdout
        .split('\n')
        .filter((line) => line.includes('kproxy'));
    const healthz = async () => {
      const got = await lab.exec(
        labNode.ns,
        'curl',
        ['-s', '-o', '/dev/null', '-w', '%{http_code}', HEALTHZ],
        {
          reject: false,
        },
      );
      return got.stdout;
    };
    /** runc runs the bundle with `config` as container `id`, its output kept; stopped at cleanup. */
    const run = async (id: string, config: RuntimeConfig) => {
      await writeFile(join(bundle, 'config.json'), JSON.stringify(config));
      const container = execa('runc', ['run', '--bundle', bundle, id], {
        reject: false,
        all: true,
        buffer: false,
        stdin: 'ignore',
      });
      let output = '';
      container.all?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      const stop = async () => {
        await execa('runc', ['kill', id, 'KILL'], { reject: false });
        await container;
        await execa('runc', ['delete', '--force', id], { reject: false });
      };
      cleanups.unshift(stop);
      return { output: () => output, stop };
    };

    // Without CAP_NET_ADMIN (the rest as the manifest gives it): its syncs fail, saying why, and it
    // leaves no rule.
    const withoutNetAdmin = structuredClone(manifest);
    for (const set of Object.values(withoutNetAdmin.process.capabilities)) {
      set.splice(set.indexOf('CAP_NET_ADMIN'), 1);
    }
    const refused = await run(`kproxy-${labNode.ns}-no-net-admin`, withoutNetAdmin);
    await eventually(
      'a failed sync',
      async () => refused.output().includes('"sync failed'),
      SYNC_DEADLINE_MS,
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${refused.output()}`);
    });
    assert.match(refused.output(), /Operation not permitted/);
    assert.deepEqual(await kproxyTables(), []);
    await refused.stop();

    // As the DaemonSet runs it.
    const daemon = await run(`kproxy-${labNode.ns}`, manifest);
    await eventually(
      'the daemon’s rules in the node namespace',
      async () => (await kproxyTables()).length > 0,
      SYNC_DEADLINE_MS,
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${daemon.output()}`);
    });
    await eventually('/healthz answers 200', async () => (await healthz()) === '200', SYNC_DEADLINE_MS);
    const list = (await lab.exec(labNode.ns, 'nft', ['list', 'table', 'ip', 'kproxy'])).stdout;
    assert.match(list, new RegExp(CLUSTER_IP.replaceAll('.', '\\.')));
    // What a user sees: the Service answers from its pod, on its cluster IP from the node and on the
    // node's address from outside.
    const answeredBy = async (from: string, host: string, port: number) =>
      (await topo.connect(from, 'tcp', host, port)).map((outcome) =>
        'name' in outcome ? outcome.name : outcome.error,
      );
    await eventually(
      'the NodePort answers from the pod',
      async () => {
        const answers = await answeredBy(topo.client.ns, labNode.ipv4, NODE_PORT);
        return answers.join() === labNode.pods[0]!.name;
      },
      SYNC_DEADLINE_MS,
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${daemon.output()}`);
    });
    assert.deepEqual(await answeredBy(labNode.ns, CLUSTER_IP, 80), [labNode.pods[0]!.name]);
  });
});
