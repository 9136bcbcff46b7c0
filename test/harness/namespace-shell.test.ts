// The lab's command runner in a namespace (harness/namespace-shell.ts and .pl): every kernel test's
// commands go through it, so what it reports of a command (status, output, time limit) is what
// those tests judge the product by.
import assert from 'node:assert/strict';
import { mkdtemp, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Lab, requireRoot } from '../../harness/netns.ts';

describe('the namespace shell', () => {
  let lab: Lab;
  let ns: string;
  before(async () => {
    if (process.getuid?.() !== 0) return;
    lab = new Lab('shell');
    ns = await lab.addNetns('a');
  });
  after(() => lab?.destroy());

  it('runs a command in the namespace with its stdin, and gives back its status, stdout and stderr apart', async (t) => {
    if (!requireRoot(t, 'network namespaces')) return;
    const result = await lab.exec(
      ns,
      'sh',
      ['-c', 'cat; echo "$1|$2|$3"; readlink /proc/self/ns/net >&2; exit 3', 'sh', 'two words', '', 'a\nb'],
      { input: 'from stdin\n', reject: false },
    );
    assert.equal(result.exitCode, 3);
    assert.equal(result.stdout, 'from stdin\ntwo words||a\nb');
    assert.match(result.stderr, /^net:\[\d+\]$/);
    assert.notEqual(result.stderr, await readlink('/proc/self/ns/net'), "the namespace's, not the host's");
  });

  it('reports a command that is not there (127) and one killed by a signal (128 + the signal)', async (t) => {
    if (!requireRoot(t, 'network namespaces')) return;
    const missing = await lab.exec(ns, 'kproxy-no-such-command', [], { reject: false });
    assert.equal(missing.exitCode, 127);
    assert.match(missing.stderr, /kproxy-no-such-command: No such file or directory/);
    const killed = await lab.exec(ns, 'sh', ['-c', 'kill -TERM $$'], { reject: false });
    assert.equal(killed.exitCode, 143);
  });

  it('runs commands side by side: one that waits does not hold up the others', async (t) => {
    if (!requireRoot(t, 'network namespaces')) return;
    const dir = await mkdtemp(join(tmpdir(), 'kproxy-shell-test-'));
    try {
      // Waits for a file that is made only once the others are answered: run one after another,
      // this test would never end.
      const waiting = lab.exec(ns, 'sh', ['-c', `while [ ! -e ${dir}/go ]; do sleep 0.05; done; echo went`]);
      const quick = await Promise.all(
        Array.from({ length: 200 }, (_, i) => lab.exec(ns, 'echo', [String(i)])),
      );
      assert.deepEqual(
        quick.map((r) => r.stdout),
        Array.from({ length: 200 }, (_, i) => String(i)),
      );
      await writeFile(join(dir, 'go'), '');
      assert.equal((await waiting).stdout, 'went');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('kills a command past its time limit with everything in its process group, and says so', async (t) => {
    if (!requireRoot(t, 'network namespaces')) return;
    // Durations no other process has: what is left of the command and of its child is found by them.
    const [child, command] = [`9${process.pid}1`, `9${process.pid}2`];
    const result = await lab.exec(ns, 'sh', ['-c', `sleep ${child} & sleep ${command}`], {
      timeoutMs: 300,
      reject: false,
    });
    assert.equal(result.exitCode, -1, 'timed out');
    await assert.rejects(lab.exec(ns, 'sleep', ['5'], { timeoutMs: 100 }), /timed out after 100 ms/);
    // SIGKILL is sent to both at once; the child may take a moment to be gone.
    const left = async () =>
      (await lab.exec(ns, 'pgrep', ['-f', `^sleep (${child}|${command})$`], { reject: false })).stdout;
    for (let tries = 0; (await left()) !== '' && tries < 100; tries++) await sleep(50);
    assert.equal(await left(), '', 'nothing of the killed command is left');
    // A limit that passes before the command has even opened its output files: the kill follows
    // "started" at once, and the command is still reported timed out (its output empty), not lost
    // for want of files it never made (CI: ENOENT on its .err, one run in a few hundred).
    for (let i = 0; i < 30; i++)
      await assert.rejects(lab.exec(ns, 'sleep', ['5'], { timeoutMs: 1 }), /timed out after 1 ms/);
    // A command that ends in time is not reported as timed out, whatever its status.
    const quick = await lab.exec(ns, 'sh', ['-c', 'exit 137'], { timeoutMs: 10_000, reject: false });
    assert.equal(quick.exitCode, 137);
  });
});
