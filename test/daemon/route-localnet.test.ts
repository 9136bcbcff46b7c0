import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { requireRoot } from '../../harness/netns.ts';
import { applyRouteLocalnet } from '../../src/daemon/route-localnet.ts';
import type { ProxyOptions } from '../../src/model/node-settings.ts';
import { options } from '../model/fixtures.ts';

const execFileAsync = promisify(execFile);
const CONF = 'sys/net/ipv4/conf/all';

/** A fake /proc holding route_localnet at `value`. */
async function fakeProc(t: { after(fn: () => Promise<void>): void }, value: number) {
  const root = await mkdtemp(join(tmpdir(), 'kproxy-proc-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, CONF), { recursive: true });
  await writeFile(join(root, CONF, 'route_localnet'), `${value}\n`);
  const read = async () => Number((await readFile(join(root, CONF, 'route_localnet'), 'utf8')).trim());
  return { root, read };
}

/** kube-proxy's iptables defaults: every address, localhost node ports on. */
const SERVED: Partial<ProxyOptions> = { nodePortAddresses: [], localhostNodePorts: true };

test('set to 1 when localhost node ports are served, and only then', async (t) => {
  const proc = await fakeProc(t, 0);
  assert.deepEqual(await applyRouteLocalnet(options(SERVED), proc.root), [
    { key: 'net.ipv4.conf.all.route_localnet', action: 'set', from: 0, to: 1 },
  ]);
  assert.equal(await proc.read(), 1);
  assert.deepEqual(await applyRouteLocalnet(options(SERVED), proc.root), [], 'already 1: nothing to do');
});

test('left alone when they are not served: option off (nftables, IPVS), or no loopback address', async (t) => {
  const proc = await fakeProc(t, 0);
  for (const overrides of [
    { ...SERVED, localhostNodePorts: false },
    { ...SERVED, nodePortAddresses: ['primary'] },
    { ...SERVED, nodePortAddresses: ['10.0.0.0/8'] },
  ]) {
    assert.deepEqual(await applyRouteLocalnet(options(overrides), proc.root), [], JSON.stringify(overrides));
  }
  assert.equal(await proc.read(), 0);
});

test("a read-only /proc/sys (a container's) is skipped with the reason and what it costs", async (t) => {
  if (!requireRoot(t, 'a private mount namespace')) return;
  const proc = await fakeProc(t, 0);
  const module = fileURLToPath(new URL('../../src/daemon/route-localnet.ts', import.meta.url));
  const code = `
    import { applyRouteLocalnet } from ${JSON.stringify(module)};
    const options = ${JSON.stringify(options(SERVED))};
    console.log(JSON.stringify(await applyRouteLocalnet(options, ${JSON.stringify(proc.root)})));
  `;
  // The fake /proc remounted read-only in a private mount namespace: EROFS, as in a container.
  const script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"';
  const { stdout } = await execFileAsync('unshare', [
    '-m',
    '--propagation',
    'private',
    'sh',
    '-c',
    script,
    'sh',
    proc.root,
    process.execPath,
    '--input-type=module',
    '-e',
    code,
  ]);
  assert.deepEqual(JSON.parse(stdout), [
    {
      key: 'net.ipv4.conf.all.route_localnet',
      action: 'skipped',
      reason: 'cannot be written here (EROFS); NodePorts on 127.0.0.1 will not answer',
    },
  ]);
  assert.equal(await proc.read(), 0);
});
