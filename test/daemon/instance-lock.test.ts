import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { acquireInstanceLock } from '../../src/daemon/instance-lock.ts';

// Distinct from a real daemon's lock and from parallel test processes.
const prefix = `kproxy-test-${process.pid}`;
const NODE = fileURLToPath(new URL('../../node_modules/.bin/node', import.meta.url));
const MODULE = fileURLToPath(new URL('../../src/daemon/instance-lock.ts', import.meta.url));

/** Node arguments: take the lock, print the outcome, then hold it until killed or release it. */
function lockScript(hold: boolean): string[] {
  const code = `
    import { acquireInstanceLock } from ${JSON.stringify(MODULE)};
    const result = await acquireInstanceLock({ prefix: ${JSON.stringify(prefix)} });
    console.log(result.ok ? 'locked ' + result.lock.name : 'refused: ' + result.message);
    if (result.ok) ${hold ? 'setInterval(() => {}, 1000)' : 'await result.lock.release()'};
  `;
  return ['--input-type=module', '-e', code];
}

describe('instance lock', () => {
  test('a second instance in the same network namespace is refused, naming the holder', async () => {
    const first = await acquireInstanceLock({ prefix });
    assert.ok(first.ok);
    try {
      const second = await acquireInstanceLock({ prefix });
      assert.equal(second.ok, false);
      assert.ok(!second.ok);
      assert.match(second.message, new RegExp(`another kproxy \\(pid ${process.pid}\\) is already running`));
      assert.match(second.message, /net:\[\d+\]/);
    } finally {
      await first.lock.release();
    }
  });

  test('the lock is free again once released', async () => {
    const first = await acquireInstanceLock({ prefix });
    assert.ok(first.ok);
    await first.lock.release();
    const again = await acquireInstanceLock({ prefix });
    assert.ok(again.ok);
    await again.lock.release();
  });

  test('the lock is per network namespace and dies with its holder', async (t) => {
    if (!requireRoot(t)) return;
    const lab = new Lab(`lock${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    const here = await acquireInstanceLock({ prefix });
    assert.ok(here.ok);
    t.after(() => here.lock.release());

    // Held here, still free in another namespace.
    const holder = lab.spawn(ns, NODE, lockScript(true));
    assert.match(await holder.waitFor('locked'), /^locked /);
    // Within that namespace, a second one is refused.
    const refused = await lab.exec(ns, NODE, lockScript(false));
    assert.match(refused.stdout, new RegExp(`refused: another kproxy \\(pid ${holder.pid}\\)`));
    // Killed without any clean-up, the holder's lock goes with it.
    await holder.kill();
    const after = await lab.exec(ns, NODE, lockScript(false));
    assert.match(after.stdout, /^locked /);
  });
});
