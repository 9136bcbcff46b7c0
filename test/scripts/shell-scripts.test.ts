// Every shell script in the repository (CI's, the test runner, the Vagrant lab's provisioning)
// runs only on machines this suite never sees, so a mistake would show first on a user's machine:
// each must parse, and shellcheck must find nothing in it.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { skipWithout } from '../support/host-tools.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Files git has or would add (ignored ones left out) named *.sh or starting with a sh/bash shebang;
 * not fixtures: other projects' scripts kept verbatim as test input (their SOURCES.md), not ours to lint.
 */
function shellScripts(): string[] {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: REPO,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  })
    .split('\0')
    .filter((f) => f !== '');
  return [...new Set(files)]
    .filter((f) => !f.split('/').includes('fixtures'))
    .filter((f) => f.endsWith('.sh') || isShellByShebang(join(REPO, f)))
    .sort();
}

function isShellByShebang(path: string): boolean {
  const head = Buffer.alloc(80);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return false; // deleted from the work tree but still in the index
  }
  try {
    const length = readSync(fd, head, 0, head.length, 0);
    return /^#!\s*\S*\/(?:env\s+)?(?:ba|da)?sh\b/.test(head.toString('latin1', 0, length));
  } finally {
    closeSync(fd);
  }
}

describe('shell scripts', () => {
  const scripts = shellScripts();

  test('are all found: CI, the test runner, the VM helpers, the package and the Vagrant lab', () => {
    for (const known of [
      '.ci/run',
      'scripts/test.sh',
      'scripts/ipvs-in-qemu.sh',
      'vagrant/run-scenarios.sh',
      'vagrant/provision/common.sh',
      'vagrant/provision/containerd.sh',
      'scripts/package.sh',
      'scripts/image.sh',
      'packaging/debian/postinst',
      'packaging/debian/prerm',
      'packaging/debian/postrm',
    ]) {
      assert.ok(scripts.includes(known), `${known} among ${scripts.join(', ')}`);
    }
  });

  test('parse (bash -n)', () => {
    for (const script of scripts) execFileSync('bash', ['-n', join(REPO, script)]);
  });

  test('pass shellcheck without a finding', (t) => {
    if (skipWithout(t, ['shellcheck'], 'apt-get install shellcheck')) return;
    // -x follows `source`d files (the lab's lab.env, through its source=SCRIPTDIR/ directive).
    const result = spawnSync('shellcheck', ['-x', '--format=gcc', ...scripts], {
      cwd: REPO,
      encoding: 'utf8',
    });
    assert.equal(result.error, undefined);
    assert.equal(result.stdout + result.stderr, '', 'no findings');
    assert.equal(result.status, 0);
  });
});
