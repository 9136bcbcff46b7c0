import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { commandTimeoutMs } from '../../dataplanes/shared/command-runner.ts';
import { APP_DIR, CONFIG_PATH, NODE_PATH, SERVICE_USER } from '../../src/cli/install.ts';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const UNIT = join(REPO, 'systemd/kproxy.service');

/** The unit's settings: key → values (a key may repeat). */
function settings(text: string): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (match) map.set(match[1]!, [...(map.get(match[1]!) ?? []), match[2]!]);
  }
  return map;
}

async function hasSystemdAnalyze(): Promise<boolean> {
  try {
    await run('systemd-analyze', ['--version']);
    return true;
  } catch {
    return false;
  }
}

describe('systemd/kproxy.service', () => {
  test('passes systemd-analyze verify without a warning', async (t) => {
    if (!(await hasSystemdAnalyze())) {
      process.stderr.write(`SKIPPED ${t.name}: systemd-analyze is not installed\n`);
      t.skip('needs systemd-analyze (apt-get install systemd)');
      return;
    }
    // verify checks that ExecStart's executable exists: the unit points into a scratch root whose
    // app directory is the checkout, which holds the pinned Node where an install puts it (an
    // install, a compile and ~200 MB of copies, is install.test.ts's: it runs the app with
    // NODE_PATH; the next test checks that ExecStart runs NODE_PATH).
    const dir = await mkdtemp(join(tmpdir(), 'kproxy-unit-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await mkdir(join(dir, APP_DIR, '..'), { recursive: true });
    await symlink(REPO, join(dir, APP_DIR));
    const unit = (await readFile(UNIT, 'utf8')).replaceAll(`${APP_DIR}/`, `${join(dir, APP_DIR)}/`);
    await writeFile(join(dir, 'kproxy.service'), unit);
    const result = await run('systemd-analyze', ['verify', join(dir, 'kproxy.service')]);
    assert.equal(result.stderr, '', 'no warnings (an unknown or misspelt directive is only a warning)');
  });

  test('runs the installed kproxy with its config, always restarts, and replaces kube-proxy', async () => {
    const unit = settings(await readFile(UNIT, 'utf8'));
    assert.deepEqual(unit.get('ExecStart'), [
      `${NODE_PATH} --max-semi-space-size=4 ${APP_DIR}/bin/kproxy.js run --config ${CONFIG_PATH} $KPROXY_ARGS`,
    ]);
    // Extra flags come from an optional file (the leading "-"), so the unit is never edited.
    assert.deepEqual(unit.get('EnvironmentFile'), ['-/etc/default/kproxy']);
    // As the kubelet ranks kube-proxy: the OOM killer takes the node's Service proxy last.
    assert.deepEqual(unit.get('OOMScoreAdjust'), ['-999']);
    assert.deepEqual(unit.get('Environment'), [
      'MALLOC_ARENA_MAX=2',
      'MALLOC_MMAP_THRESHOLD_=131072',
      'MALLOC_TRIM_THRESHOLD_=131072',
      'TMPDIR=/run/kproxy',
    ]);
    assert.deepEqual(unit.get('RuntimeDirectory'), ['kproxy']);
    assert.deepEqual(unit.get('Type'), ['exec']);
    // A node agent is never given up on: any exit restarts it, and no start-rate limit stops that.
    assert.deepEqual(unit.get('Restart'), ['always']);
    assert.deepEqual(unit.get('StartLimitIntervalSec'), ['0']);
    assert.deepEqual(unit.get('Conflicts'), ['kube-proxy.service']);
  });

  test('the stop bound is shorter than a stuck tool’s timeout', async () => {
    const unit = settings(await readFile(UNIT, 'utf8'));
    // kproxy's stop waits for a sync in flight; past TimeoutStopSec systemd kills it, which leaves
    // the last committed rules. A bound as long as a command's timeout would hold a restart for
    // minutes behind a stuck tool.
    const stopSeconds = Number(/^(\d+)s$/.exec(unit.get('TimeoutStopSec')?.[0] ?? '')?.[1]);
    assert.ok(
      stopSeconds > 0 && stopSeconds * 1000 < commandTimeoutMs('nft'),
      `TimeoutStopSec=${stopSeconds}s`,
    );
  });

  test('runs as its own user, never root, and a blocked system call fails instead of killing it', async () => {
    const unit = settings(await readFile(UNIT, 'utf8'));
    assert.deepEqual(unit.get('User'), [SERVICE_USER]);
    assert.deepEqual(unit.get('Group'), [SERVICE_USER]);
    assert.deepEqual(unit.get('SystemCallErrorNumber'), ['EPERM']);
    // iptables-legacy opens /run/xtables.lock O_RDONLY|O_CREAT: as root, the file is made to exist
    // and be readable by the group, in place (another program may hold the lock).
    assert.deepEqual(unit.get('ExecStartPre'), [
      '+/usr/bin/touch /run/xtables.lock',
      `+/usr/bin/chgrp ${SERVICE_USER} /run/xtables.lock`,
      '+/usr/bin/chmod g+r /run/xtables.lock',
    ]);
  });

  test('has only the capabilities it needs and the hardening options', async () => {
    const unit = settings(await readFile(UNIT, 'utf8'));
    assert.deepEqual(unit.get('CapabilityBoundingSet'), ['CAP_NET_ADMIN CAP_NET_RAW']);
    assert.deepEqual(unit.get('AmbientCapabilities'), ['CAP_NET_ADMIN CAP_NET_RAW']);
    assert.deepEqual(unit.get('RestrictAddressFamilies'), ['AF_UNIX AF_INET AF_INET6 AF_NETLINK']);
    for (const key of [
      'NoNewPrivileges',
      'ProtectHome',
      'PrivateTmp',
      'ProtectKernelTunables',
      'PrivateDevices',
    ]) {
      assert.deepEqual(unit.get(key), ['yes'], key);
    }
    assert.deepEqual(unit.get('ProtectSystem'), ['strict']);
    assert.deepEqual(unit.get('ReadWritePaths'), ['/proc/sys/net']);
    assert.deepEqual(unit.get('SystemCallFilter'), ['@system-service', '~@privileged', 'capset']);
  });
});
