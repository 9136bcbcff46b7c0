// TCP connect latency through a node's proxy rules, the same for every mode measured on the host:
// the node namespace is the client (host-network path, rules on OUTPUT); every pod IP is local in
// a server namespace behind it, where one echo server answers on the endpoints' port.
import { join } from 'node:path';
import type { Lab } from '../harness/netns.ts';
import { BENCH_NODE_IP } from './bench-model.ts';
import { median, round } from './measure.ts';
import { syntheticService } from './synthetic-cluster.ts';

const SERVER_IP = '10.200.0.2';
const ECHO_PORT = 8080;

/**
 * Medians of connects from `nodeNs` to the first and the last of `services` services, in
 * alternating rounds so that load from elsewhere hits both alike, in microseconds.
 */
export async function firstLastConnectUs(
  lab: Lab,
  nodeNs: string,
  services: number,
  connects: number,
): Promise<{ readonly connectFirstServiceUs: number; readonly connectLastServiceUs: number }> {
  const serverNs = await lab.addNetns('server');
  await lab.addVeth(nodeNs, 'kpb0', serverNs, 'kpb1');
  await lab.addAddress(nodeNs, 'kpb0', `${BENCH_NODE_IP}/30`);
  await lab.addAddress(serverNs, 'kpb1', `${SERVER_IP}/30`);
  await lab.addRoute(nodeNs, ['10.96.0.0/12', 'via', SERVER_IP]);
  // A /14: the pods of a wide service run on past 10.244.255.255 (synthetic-cluster.ts).
  await lab.addRoute(nodeNs, ['10.244.0.0/14', 'via', SERVER_IP]);
  await lab.addRoute(serverNs, ['local', '10.244.0.0/14', 'dev', 'lo']);
  const echo = lab.spawn(serverNs, process.execPath, [
    join(import.meta.dirname, '../harness/echo-server.ts'),
    'bench',
    '--tcp',
    String(ECHO_PORT),
  ]);
  await echo.waitFor('ready');
  const latency = async (serviceIndex: number) => {
    const ip = syntheticService(serviceIndex).spec.clusterIP!;
    const { stdout } = await lab.exec(nodeNs, process.execPath, [
      join(import.meta.dirname, 'connect-latency.ts'),
      ip,
      '80',
      String(connects),
    ]);
    return (JSON.parse(stdout) as { medianUs: number }).medianUs;
  };
  const first: number[] = [];
  const last: number[] = [];
  for (let r = 0; r < 3; r++) {
    first.push(await latency(0));
    last.push(await latency(services - 1));
  }
  return { connectFirstServiceUs: round(median(first)), connectLastServiceUs: round(median(last)) };
}
