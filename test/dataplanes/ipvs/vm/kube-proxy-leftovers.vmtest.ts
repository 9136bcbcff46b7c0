// `kproxy cleanup --kube-proxy` against what kube-proxy's IPVS mode leaves, on a kernel with ip_vs.
// Runs INSIDE the throwaway qemu VM (test/in-vm.test.ts). The leftovers are made in a lab
// namespace of the VM and the real CLI runs there (IPVS is per namespace, and the cleanup flushes
// every virtual service, so it must not touch the VM namespace the other in-VM tests use).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { KPROXY_BIN } from '../../../../harness/kproxy-bin.ts';
import { Lab } from '../../../../harness/netns.ts';

const lab = new Lab('kpleft');
after(() => lab.destroy());

test('cleanup --kube-proxy removes kube-proxy IPVS services, kube-ipvs0, its ipsets and chains; others stay', async () => {
  const ns = await lab.addNetns('node');
  const sh = (script: string) => lab.exec(ns, 'sh', ['-ec', script]);
  // What kube-proxy's IPVS mode leaves: the dummy link with a ClusterIP, virtual services on it
  // and on a node address, its ipsets and the iptables rules that match them.
  await sh(`
    ip link add kube-ipvs0 type dummy
    ip addr add 10.96.0.10/32 dev kube-ipvs0
    ip link add eth0 type dummy
    ip link set eth0 up
    ip addr add 10.100.0.11/24 dev eth0
    ipvsadm -A -t 10.96.0.10:53 -s rr
    ipvsadm -a -t 10.96.0.10:53 -r 10.244.1.10:53 -m
    ipvsadm -A -t 10.100.0.11:30080 -s rr
    ipset create KUBE-CLUSTER-IP hash:ip,port
    ipset add KUBE-CLUSTER-IP 10.96.0.10,tcp:53
    ipset create KUBE-6-CLUSTER-IP hash:ip,port family inet6
    ipset create KUBE-DST-KUBEROUTER hash:ip
    iptables -t nat -N KUBE-SERVICES
    iptables -t nat -A PREROUTING -j KUBE-SERVICES
    iptables -t nat -A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
  `);
  assert.equal((await sh('ipvsadm -S -n | grep -c "^-A"')).stdout.trim(), '2');

  const run = await lab.exec(ns, process.execPath, [
    KPROXY_BIN,
    'cleanup',
    '--mode',
    'iptables',
    '--kube-proxy',
  ]);
  assert.match(run.stdout, /removed IPVS: 2 virtual service\(s\)/);
  assert.match(run.stdout, /removed link kube-ipvs0/);
  assert.match(run.stdout, /removed ipset: KUBE-CLUSTER-IP, KUBE-6-CLUSTER-IP/);

  assert.equal((await sh('ipvsadm -S -n')).stdout.trim(), '');
  assert.doesNotMatch((await sh('ip -o link show')).stdout, /kube-ipvs0/);
  assert.deepEqual((await sh('ipset list -n')).stdout.trim().split('\n'), ['KUBE-DST-KUBEROUTER']);
  assert.doesNotMatch((await sh('iptables -t nat -S')).stdout, /KUBE-SERVICES/);
});
