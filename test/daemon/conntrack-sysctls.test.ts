import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Lab, requireRoot } from '../../harness/netns.ts';
import type { ConntrackConfig } from '../../src/config/config.ts';
import { applyConntrackSysctls, conntrackMax } from '../../src/daemon/conntrack-sysctls.ts';

/** kube-proxy's defaults. */
const DEFAULTS: ConntrackConfig = {
  maxPerCore: 32768,
  min: 131072,
  tcpEstablishedTimeoutMs: 86_400_000,
  tcpCloseWaitTimeoutMs: 3_600_000,
  tcpBeLiberal: false,
  udpTimeoutMs: 0,
  udpStreamTimeoutMs: 0,
};

const execFileAsync = promisify(execFile);
const NF = 'sys/net/netfilter';
const PARAMETERS = 'module/nf_conntrack/parameters';

/** A fake /proc: `initNetns` decides whether self and PID 1 share a network namespace. */
async function fakeProc(t: { after(fn: () => Promise<void>): void }, initNetns: boolean, loaded = true) {
  const root = await mkdtemp(join(tmpdir(), 'kproxy-proc-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'self/ns'), { recursive: true });
  await mkdir(join(root, '1/ns'), { recursive: true });
  await symlink('net:[4026531833]', join(root, '1/ns/net'));
  await symlink(initNetns ? 'net:[4026531833]' : 'net:[4026532999]', join(root, 'self/ns/net'));
  await mkdir(join(root, NF), { recursive: true });
  if (loaded) {
    const values: Record<string, number> = {
      nf_conntrack_max: 65536,
      nf_conntrack_tcp_timeout_established: 432000,
      nf_conntrack_tcp_timeout_close_wait: 3600,
      nf_conntrack_tcp_be_liberal: 0,
      nf_conntrack_udp_timeout: 30,
      nf_conntrack_udp_timeout_stream: 120,
    };
    for (const [name, value] of Object.entries(values)) await writeFile(join(root, NF, name), `${value}\n`);
  }
  const sys = join(root, 'fake-sys');
  if (loaded) {
    await mkdir(join(sys, PARAMETERS), { recursive: true });
    await writeFile(join(sys, PARAMETERS, 'hashsize'), '16384\n');
  }
  const read = async (name: string) => Number((await readFile(join(root, NF, name), 'utf8')).trim());
  const hashsize = async () => Number((await readFile(join(sys, PARAMETERS, 'hashsize'), 'utf8')).trim());
  return { root, sys, read, hashsize };
}

describe('conntrackMax', () => {
  test('is maxPerCore × cores, at least min, and 0 (leave alone) when maxPerCore is 0', () => {
    assert.equal(conntrackMax(DEFAULTS, 2), 131072);
    assert.equal(conntrackMax(DEFAULTS, 8), 262144);
    assert.equal(conntrackMax({ ...DEFAULTS, maxPerCore: 0 }, 8), 0);
  });
});

describe('applyConntrackSysctls', () => {
  test('in the host namespace: raises nf_conntrack_max and writes only the timeouts that differ', async (t) => {
    const proc = await fakeProc(t, true);
    const result = await applyConntrackSysctls(
      { ...DEFAULTS, udpTimeoutMs: 30_000, udpStreamTimeoutMs: 300_000, tcpBeLiberal: true },
      { procRoot: proc.root, sysRoot: proc.sys, cores: 8 },
    );
    assert.deepEqual(result, {
      ok: true,
      actions: [
        { key: 'net.netfilter.nf_conntrack_max', action: 'set', from: 65536, to: 262144 },
        { key: 'nf_conntrack.hashsize', action: 'set', from: 16384, to: 65536 },
        { key: 'net.netfilter.nf_conntrack_tcp_timeout_established', action: 'set', from: 432000, to: 86400 },
        { key: 'net.netfilter.nf_conntrack_tcp_be_liberal', action: 'set', from: 0, to: 1 },
        { key: 'net.netfilter.nf_conntrack_udp_timeout_stream', action: 'set', from: 120, to: 300 },
      ],
    });
    assert.equal(await proc.read('nf_conntrack_max'), 262144);
    assert.equal(await proc.hashsize(), 65536);
    assert.equal(await proc.read('nf_conntrack_tcp_timeout_established'), 86400);
    assert.equal(await proc.read('nf_conntrack_udp_timeout'), 30);
  });

  test('never lowers nf_conntrack_max', async (t) => {
    const proc = await fakeProc(t, true);
    await writeFile(join(proc.root, NF, 'nf_conntrack_max'), '1048576\n');
    const result = await applyConntrackSysctls(DEFAULTS, {
      procRoot: proc.root,
      sysRoot: proc.sys,
      cores: 2,
    });
    assert.ok(result.ok);
    assert.equal(
      result.actions.find((a) => a.key === 'net.netfilter.nf_conntrack_max'),
      undefined,
    );
    assert.equal(await proc.read('nf_conntrack_max'), 1048576);
  });

  test('the hash size is max/4 of the wanted max even when the max is already higher, and never lowered', async (t) => {
    const proc = await fakeProc(t, true);
    await writeFile(join(proc.root, NF, 'nf_conntrack_max'), '1048576\n');
    const raised = await applyConntrackSysctls(DEFAULTS, {
      procRoot: proc.root,
      sysRoot: proc.sys,
      cores: 2,
    });
    assert.deepEqual(
      raised.actions.filter((a) => a.key === 'nf_conntrack.hashsize'),
      [{ key: 'nf_conntrack.hashsize', action: 'set', from: 16384, to: 32768 }],
    );
    await writeFile(join(proc.sys, PARAMETERS, 'hashsize'), '262144\n');
    const kept = await applyConntrackSysctls(DEFAULTS, { procRoot: proc.root, sysRoot: proc.sys, cores: 2 });
    assert.ok(kept.ok);
    assert.equal(
      kept.actions.find((a) => a.key === 'nf_conntrack.hashsize'),
      undefined,
    );
    assert.equal(await proc.hashsize(), 262144);
  });

  test("a read-only /sys (a container's) skips the hash size with its reason; the rest still applies", async (t) => {
    if (!requireRoot(t)) return;
    const proc = await fakeProc(t, true);
    // The fake /sys remounted read-only in a private mount namespace: EROFS, as in a container.
    const module = fileURLToPath(new URL('../../src/daemon/conntrack-sysctls.ts', import.meta.url));
    const code = `
      import { applyConntrackSysctls } from ${JSON.stringify(module)};
      const config = ${JSON.stringify(DEFAULTS)};
      const env = ${JSON.stringify({ procRoot: proc.root, sysRoot: proc.sys, cores: 8 })};
      console.log(JSON.stringify(await applyConntrackSysctls(config, env)));
    `;
    const script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"';
    const { stdout } = await execFileAsync('unshare', [
      '-m',
      '--propagation',
      'private',
      'sh',
      '-c',
      script,
      'sh',
      proc.sys,
      process.execPath,
      '--input-type=module',
      '-e',
      code,
    ]);
    const result = JSON.parse(stdout);
    assert.equal(result.ok, true, stdout);
    assert.deepEqual(
      result.actions.find((a: { key: string }) => a.key === 'nf_conntrack.hashsize'),
      { key: 'nf_conntrack.hashsize', action: 'skipped', reason: '/sys cannot be written here (EROFS)' },
    );
    assert.equal(await proc.read('nf_conntrack_max'), 262144);
    assert.equal(await proc.hashsize(), 16384);
  });

  test('in another network namespace: skips the host-wide max with a reason, still sets timeouts', async (t) => {
    const proc = await fakeProc(t, false);
    const result = await applyConntrackSysctls(DEFAULTS, {
      procRoot: proc.root,
      sysRoot: proc.sys,
      cores: 8,
    });
    assert.ok(result.ok);
    assert.deepEqual(result.actions[0], {
      key: 'net.netfilter.nf_conntrack_max',
      action: 'skipped',
      reason: 'host-wide, and this is not the host network namespace',
    });
    assert.deepEqual(result.actions[1], {
      key: 'nf_conntrack.hashsize',
      action: 'skipped',
      reason: 'host-wide, and this is not the host network namespace',
    });
    assert.equal(await proc.read('nf_conntrack_max'), 65536);
    assert.equal(await proc.hashsize(), 16384);
    assert.equal(await proc.read('nf_conntrack_tcp_timeout_established'), 86400);
  });

  test('without the conntrack module, says so instead of failing', async (t) => {
    const proc = await fakeProc(t, true, false);
    const result = await applyConntrackSysctls(DEFAULTS, {
      procRoot: proc.root,
      sysRoot: proc.sys,
      cores: 2,
    });
    assert.ok(result.ok);
    assert.ok(
      result.actions.every((a) => a.action === 'skipped' && a.reason === 'nf_conntrack is not loaded'),
    );
  });

  test('a sysctl that cannot be written is an error naming it', async (t) => {
    const proc = await fakeProc(t, true);
    // A directory where the file should be: the write fails like a read-only /proc would.
    await rm(join(proc.root, NF, 'nf_conntrack_tcp_timeout_established'));
    await mkdir(join(proc.root, NF, 'nf_conntrack_tcp_timeout_established'));
    const result = await applyConntrackSysctls(
      { ...DEFAULTS, maxPerCore: 0 },
      { procRoot: proc.root, sysRoot: proc.sys, cores: 2 },
    );
    assert.equal(result.ok, false);
    assert.ok(!result.ok);
    assert.match(
      result.error,
      /^conntrack settings: cannot set net.netfilter.nf_conntrack_tcp_timeout_established: EISDIR$/,
    );
  });

  test('on the real kernel, inside a lab namespace: timeouts change there and not on the host', async (t) => {
    if (!requireRoot(t)) return;
    const hostEstablished = (
      await readFile('/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established', 'utf8').catch(() => '')
    ).trim();
    if (hostEstablished === '') {
      t.skip('nf_conntrack is not loaded on this host');
      return;
    }
    const hostMax = (await readFile('/proc/sys/net/netfilter/nf_conntrack_max', 'utf8')).trim();
    const lab = new Lab(`ctsys${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    // Never the host's /sys: the hash size is host-wide (and must be skipped here anyway).
    const fakeSys = await mkdtemp(join(tmpdir(), 'kproxy-sys-'));
    t.after(() => rm(fakeSys, { recursive: true, force: true }));
    const module = fileURLToPath(new URL('../../src/daemon/conntrack-sysctls.ts', import.meta.url));
    const wanted = Number(hostEstablished) === 12345 ? 23456 : 12345;
    const code = `
      import { applyConntrackSysctls } from ${JSON.stringify(module)};
      const config = ${JSON.stringify({ ...DEFAULTS, tcpEstablishedTimeoutMs: wanted * 1000 })};
      console.log(JSON.stringify(await applyConntrackSysctls(config, { procRoot: '/proc', sysRoot: ${JSON.stringify(fakeSys)}, cores: 64 })));
    `;
    const node = fileURLToPath(new URL('../../node_modules/.bin/node', import.meta.url));
    const run = await lab.exec(ns, node, ['--input-type=module', '-e', code]);
    const result = JSON.parse(run.stdout);
    assert.equal(result.ok, true, run.stdout);
    assert.equal(result.actions[0].action, 'skipped');
    const inside = await lab.exec(ns, 'cat', [
      '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established',
    ]);
    assert.equal(Number(inside.stdout.trim()), wanted);
    assert.equal(
      (await readFile('/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established', 'utf8')).trim(),
      hostEstablished,
    );
    assert.equal((await readFile('/proc/sys/net/netfilter/nf_conntrack_max', 'utf8')).trim(), hostMax);
  });
});
