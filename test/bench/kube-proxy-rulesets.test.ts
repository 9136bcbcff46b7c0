// kube-proxy's shapes (bench/kube-proxy-rulesets.ts) load into a real kernel, in throwaway
// namespaces: what the kubeproxyshape bench section times must be a ruleset the tools accept, with
// the objects of the cluster it stands for, and its changes must leave the table consistent.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import {
  kubeProxyIptablesPartial,
  kubeProxyIptablesRestore,
  kubeProxyNftChunks,
  kubeProxyNftRuleset,
} from '../../bench/kube-proxy-rulesets.ts';
import { syntheticSlice } from '../../bench/synthetic-cluster.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';

const SERVICES = 12;
const ENDPOINTS = 3;
const text = (lines: Iterable<string>) => `${[...lines].join('\n')}\n`;
const sortedLines = (listing: string) =>
  listing
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .sort();

describe('kube-proxy-shaped rulesets in the kernel', () => {
  const lab = new Lab('kpshape');
  after(() => lab.destroy());

  it('nftables: one transaction loads every chain and element, and the chunked transactions load the same', async (t) => {
    if (!requireRoot(t)) return;
    const [one, chunked] = await Promise.all([lab.addNetns('one'), lab.addNetns('chunks')]);
    await lab.exec(one, 'nft', ['-f', '-'], { input: text(kubeProxyNftRuleset(SERVICES, ENDPOINTS)) });
    const chunks = [...kubeProxyNftChunks(SERVICES, ENDPOINTS, 5)];
    assert.equal(chunks.length, 1 + 3, 'the base, then 5 + 5 + 2 services');
    for (const chunk of chunks) await lab.exec(chunked, 'nft', ['-f', '-'], { input: text(chunk) });

    const { stdout } = await lab.exec(one, 'nft', ['-j', 'list', 'table', 'ip', 'kube-proxy']);
    const objects = (JSON.parse(stdout) as { nftables: Record<string, { name: string; elem?: unknown[] }>[] })
      .nftables;
    const chains = objects.filter((o) => o.chain).map((o) => o.chain!.name);
    assert.equal(chains.length, 6 + SERVICES * (1 + ENDPOINTS));
    const endpoint = syntheticSlice(7, ENDPOINTS, 1).endpoints![2]!.addresses[0];
    assert.ok(
      chains.some(
        (c) => /^endpoint-[A-Z2-7]{8}-ns0\/svc7\/tcp\/http__/.test(c) && c.endsWith(`${endpoint}/8080`),
      ),
    );
    const elements = (name: string) => objects.find((o) => o.map?.name === name || o.set?.name === name);
    assert.equal((elements('service-ips')!.map ?? elements('service-ips')!.set)!.elem!.length, SERVICES);
    assert.equal(elements('cluster-ips')!.set!.elem!.length, SERVICES);

    const listing = async (ns: string) =>
      sortedLines((await lab.exec(ns, 'nft', ['list', 'ruleset'])).stdout);
    assert.deepEqual(await listing(chunked), await listing(one));
  });

  it("iptables-nft: the full restore loads, a service's partial restores move its endpoint and back", async (t) => {
    if (!requireRoot(t)) return;
    const ns = await lab.addNetns('ipt');
    const restore = (lines: Iterable<string>, noflush: boolean) =>
      lab.exec(ns, 'iptables-nft-restore', noflush ? ['--noflush', '--wait'] : ['--wait'], {
        input: text(lines),
      });
    const save = async () =>
      sortedLines((await lab.exec(ns, 'iptables-nft-save', ['-t', 'nat'])).stdout).map((l) =>
        l.replace(/\[\d+:\d+\]$/, ''),
      );
    const chains = (saved: readonly string[], prefix: string) =>
      saved.filter((l) => l.startsWith(`:${prefix}`));

    await restore(kubeProxyIptablesRestore(SERVICES, ENDPOINTS), false);
    const loaded = await save();
    assert.equal(chains(loaded, 'KUBE-SVC-').length, SERVICES);
    assert.equal(chains(loaded, 'KUBE-SEP-').length, SERVICES * ENDPOINTS);
    assert.equal(loaded.filter((l) => l.startsWith('-A KUBE-SERVICES ')).length, SERVICES + 1);

    const changed = 5;
    const [moved] = syntheticSlice(changed, ENDPOINTS, 1, 1).endpoints![0]!.addresses;
    const [original] = syntheticSlice(changed, ENDPOINTS, 1).endpoints![0]!.addresses;
    await restore(
      kubeProxyIptablesPartial(SERVICES, ENDPOINTS, { service: changed, from: 0, to: 1 }, false),
      true,
    );
    const afterChange = await save();
    assert.equal(
      chains(afterChange, 'KUBE-SEP-').length,
      SERVICES * ENDPOINTS,
      'the stale KUBE-SEP chain is gone',
    );
    assert.ok(afterChange.some((l) => l.endsWith(`--to-destination ${moved}:8080`)));
    assert.ok(!afterChange.some((l) => l.endsWith(`--to-destination ${original}:8080`)));

    // kube-proxy's own partial sync (top-level chains too) back to the first endpoint: as loaded.
    await restore(
      kubeProxyIptablesPartial(SERVICES, ENDPOINTS, { service: changed, from: 1, to: 0 }, true),
      true,
    );
    assert.deepEqual(await save(), loaded);
  });
});
