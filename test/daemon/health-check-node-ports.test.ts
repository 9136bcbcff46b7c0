import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { DualStackState, Endpoint } from '../../contract/proxy-state.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { localEndpoint, proxyState, servicePort } from '../../harness/proxy-states.ts';
import {
  HealthCheckNodePorts,
  healthCheckHosts,
  healthCheckServices,
} from '../../src/daemon/health-check-node-ports.ts';
import { listenHttp } from '../../src/daemon/http-listener.ts';
import { options } from '../model/fixtures.ts';
import { freePort } from '../support/free-port.ts';

const LOCAL = localEndpoint('10.1.0.5', 80);

const remote: Endpoint = { ...LOCAL, ip: '10.2.0.9', isLocal: false };
const terminating: Endpoint = { ...LOCAL, ip: '10.1.0.7', ready: false, terminating: true };

function lbLocal(name: string, healthCheckNodePort: number, localEndpoints: Endpoint[], portNumber = 80) {
  return servicePort(name, {
    port: portNumber,
    externalPolicyLocal: true,
    healthCheckNodePort,
    localEndpoints,
    clusterEndpoints: [...localEndpoints, remote],
  });
}

describe('healthCheckServices', () => {
  test('counts distinct ready local endpoint IPs per service, across ports and families', () => {
    const other = { ...LOCAL, port: 443 };
    const v6: Endpoint = { ...LOCAL, ip: 'fd00::5' };
    const state: DualStackState = {
      IPv4: proxyState('IPv4', [
        lbLocal('web', 30500, [LOCAL, terminating]),
        lbLocal('web', 30500, [other], 443),
        lbLocal('idle', 30600, [terminating]),
        servicePort('plain', { localEndpoints: [LOCAL] }),
      ]),
      IPv6: proxyState('IPv6', [lbLocal('web', 30500, [v6])]),
    };
    assert.deepEqual(
      [...healthCheckServices(state)],
      [
        [30500, { namespace: 'default', name: 'web', localEndpoints: 2 }],
        [30600, { namespace: 'default', name: 'idle', localEndpoints: 0 }],
      ],
    );
  });
});

describe('HealthCheckNodePorts', () => {
  test('answers like kube-proxy: 200 with the weight header when local endpoints exist, else 503', async (t) => {
    const [a, b] = [await freePort(), await freePort()];
    let proxyHealthy = true;
    const ports = new HealthCheckNodePorts({ host: '127.0.0.1', proxyHealthy: () => proxyHealthy });
    t.after(() => ports.close());
    const update = await ports.update({
      IPv4: proxyState('IPv4', [
        lbLocal('web', a, [LOCAL, { ...LOCAL, ip: '10.1.0.6' }]),
        lbLocal('idle', b, []),
      ]),
    });
    assert.deepEqual(update, { opened: [a, b].sort((x, y) => x - y), closed: [], failed: [] });

    let response = await fetch(`http://127.0.0.1:${a}/`);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('x-load-balancing-endpoint-weight'), '2');
    assert.deepEqual(await response.json(), {
      service: { namespace: 'default', name: 'web' },
      localEndpoints: 2,
      serviceProxyHealthy: true,
    });

    response = await fetch(`http://127.0.0.1:${b}/`);
    assert.equal(response.status, 503);
    assert.equal(response.headers.get('x-load-balancing-endpoint-weight'), '0');

    proxyHealthy = false;
    response = await fetch(`http://127.0.0.1:${a}/`);
    assert.equal(response.status, 503);
    assert.equal(((await response.json()) as { serviceProxyHealthy: boolean }).serviceProxyHealthy, false);
  });

  test('listeners are opened and closed as services come and go; counts follow without reopening', async (t) => {
    const [a, b] = [await freePort(), await freePort()];
    const ports = new HealthCheckNodePorts({ host: '127.0.0.1', proxyHealthy: () => true });
    t.after(() => ports.close());
    await ports.update({ IPv4: proxyState('IPv4', [lbLocal('web', a, [])]) });
    assert.equal((await fetch(`http://127.0.0.1:${a}/`)).status, 503);

    const update = await ports.update({
      IPv4: proxyState('IPv4', [lbLocal('web', a, [LOCAL]), lbLocal('db', b, [])]),
    });
    assert.deepEqual(update, { opened: [b], closed: [], failed: [] });
    assert.equal((await fetch(`http://127.0.0.1:${a}/`)).status, 200);

    const removal = await ports.update({ IPv4: proxyState('IPv4', [lbLocal('db', b, [])]) });
    assert.deepEqual(removal, { opened: [], closed: [a], failed: [] });
    assert.deepEqual(ports.ports, [b]);
    await assert.rejects(fetch(`http://127.0.0.1:${a}/`));

    await ports.close();
    assert.deepEqual(ports.ports, []);
    await assert.rejects(fetch(`http://127.0.0.1:${b}/`));
  });

  test('a port that cannot be opened is reported and retried on the next update', async (t) => {
    const squatter = await listenHttp('127.0.0.1', 0, () => {});
    const ports = new HealthCheckNodePorts({ host: '127.0.0.1', proxyHealthy: () => true });
    t.after(() => ports.close());
    const state = { IPv4: proxyState('IPv4', [lbLocal('web', squatter.port, [LOCAL])]) };
    const first = await ports.update(state);
    assert.deepEqual(
      first.failed.map((f) => f.port),
      [squatter.port],
    );
    await squatter.close();
    const second = await ports.update(state);
    assert.deepEqual(second.opened, [squatter.port]);
    assert.equal((await fetch(`http://127.0.0.1:${squatter.port}/`)).status, 200);
  });

  test('listens only on the node IPs inside --nodeport-addresses, one listener each, and follows them', async (t) => {
    const port = await freePort();
    const ports = new HealthCheckNodePorts({ proxyHealthy: () => true });
    t.after(() => ports.close());
    // Loopback stands in for the node's addresses: all of 127/8 is local without a namespace.
    const node = {
      nodeIPs: ['127.0.0.2', '127.0.0.3', '127.0.0.4'],
      nodePortAddresses: ['127.0.0.2/32', '127.0.0.3/32'],
    };
    const state = (settings: typeof node) => ({
      IPv4: proxyState('IPv4', [lbLocal('web', port, [LOCAL])], settings),
    });
    await ports.update(state(node));
    assert.deepEqual(ports.hosts, ['127.0.0.2', '127.0.0.3']);
    assert.equal((await fetch(`http://127.0.0.2:${port}/`)).status, 200);
    assert.equal((await fetch(`http://127.0.0.3:${port}/`)).status, 200);
    await assert.rejects(fetch(`http://127.0.0.4:${port}/`));
    await assert.rejects(fetch(`http://127.0.0.1:${port}/`));

    // The node's addresses changed (a full sync): the port moves with them.
    await ports.update(state({ ...node, nodePortAddresses: ['127.0.0.4/32'] }));
    assert.equal((await fetch(`http://127.0.0.4:${port}/`)).status, 200);
    await assert.rejects(fetch(`http://127.0.0.2:${port}/`));
  });
});

describe('healthCheckHosts', () => {
  test("the node IPs inside each family's NodePort CIDRs; every address when a family is not limited", () => {
    const v4 = { nodeIPs: ['192.168.1.5', '10.0.0.5'], nodePortAddresses: ['192.168.1.0/24'] };
    const v6 = { nodeIPs: ['fd00::5'], nodePortAddresses: ['fd00::5/128'] };
    assert.deepEqual(
      healthCheckHosts({ IPv4: proxyState('IPv4', [], v4), IPv6: proxyState('IPv6', [], v6) }),
      ['192.168.1.5', 'fd00::5'],
    );
    assert.deepEqual(
      healthCheckHosts({
        IPv4: proxyState('IPv4', [], v4),
        IPv6: proxyState('IPv6', [], { nodePortAddresses: 'all' }),
      }),
      ['::'],
    );
    assert.deepEqual(
      healthCheckHosts({ IPv4: proxyState('IPv4', [], { ...v4, nodePortAddresses: ['172.16.0.0/12'] }) }),
      [],
    );
  });
});

describe('health check node ports with --nodeport-addresses localhost', () => {
  test("listen on lo's 127.0.0.1 and ::1 only, as kube-proxy's interface addresses in 127.0.0.0/8 and ::1/128", async (t) => {
    if (!requireRoot(t)) return;
    const lab = new Lab('hcnp');
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    // The node's own addresses, on a link of their own (a veth pair within the namespace).
    await lab.addVeth(ns, 'eth0', ns, 'eth1');
    await lab.addAddress(ns, 'eth0', '10.0.0.1/24');
    await lab.addAddress(ns, 'eth0', 'fd00::1/64');
    const PORT = 32100;
    // The daemon's path from the option to the listeners, in the node's namespace.
    const module = (path: string) => JSON.stringify(fileURLToPath(new URL(path, import.meta.url)));
    const nodeOptions = options({ nodeIPs: ['10.0.0.1', 'fd00::1'], nodePortAddresses: ['localhost'] });
    const code = `
      import { HealthCheckNodePorts } from ${module('../../src/daemon/health-check-node-ports.ts')};
      import { nodeSettingsByFamily } from ${module('../../src/model/node-settings.ts')};
      import { localEndpoint, servicePort } from ${module('../../harness/proxy-states.ts')};
      const settings = nodeSettingsByFamily(${JSON.stringify(nodeOptions)}, undefined, []);
      const ep = localEndpoint('10.1.0.5', 80);
      const sp = servicePort('web', { externalPolicyLocal: true, healthCheckNodePort: ${PORT}, clusterEndpoints: [ep] });
      const state = (family) => ({ family, node: settings[family], servicePorts: new Map([[sp.key, sp]]) });
      const ports = new HealthCheckNodePorts({ proxyHealthy: () => true });
      const update = await ports.update({ IPv4: state('IPv4'), IPv6: state('IPv6') });
      console.log(JSON.stringify({ hosts: ports.hosts, update }));
    `;
    const server = lab.spawn(ns, process.execPath, ['--input-type=module', '-e', code]);
    const { hosts, update } = JSON.parse(await server.waitFor('hosts'));
    assert.deepEqual(hosts, ['127.0.0.1', '::1']);
    assert.deepEqual(update, { opened: [PORT], closed: [], failed: [] });
    const status = async (host: string) => {
      const args = [
        '-s',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        '--max-time',
        '5',
        `http://${host}:${PORT}/`,
      ];
      return (await lab.exec(ns, 'curl', args, { reject: false })).stdout;
    };
    assert.equal(await status('127.0.0.1'), '200');
    assert.equal(await status('[::1]'), '200');
    // Refused at once (000: no connection), not answered: the node's own addresses are not in the CIDRs.
    assert.equal(await status('10.0.0.1'), '000');
    assert.equal(await status('[fd00::1]'), '000');
  });
});
