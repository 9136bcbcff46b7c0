// The persistent `nft -i` session: one transaction per line, errors told apart by the sentinel.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { CommandTimeoutError } from '../../../contract/dataplane-error.ts';
import { NftError } from '../../../dataplanes/nftables/nft-error.ts';
import { fitsSession, NftSession, oneLine } from '../../../dataplanes/nftables/nft-session.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { NftTransaction } from '../../../dataplanes/shared/nft/transaction.ts';
import { allowance } from '../../../harness/emulation.ts';
import { Lab } from '../../../harness/netns.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: a network namespace and nft (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED nft session kernel tests: ${ROOT_REASON}\n`);

/** Not gone and not a zombie. */
function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}

function elements(tx: NftTransaction, ips: readonly string[]): NftTransaction {
  return tx.addElements(
    'ip',
    's',
    ips.map((key) => ({ key })),
  );
}

test('a multi-command script with element lists becomes one line, braces and commas kept', () => {
  const tx = elements(new NftTransaction().deleteElements('ip', 's', [{ key: '1.1.1.1' }]), [
    '2.2.2.2',
    '3.3.3.3',
  ]);
  assert.equal(
    oneLine(tx.toString()),
    'delete element ip kproxy s { 1.1.1.1 }; add element ip kproxy s { 2.2.2.2, 3.3.3.3, }',
  );
});

test('only a script whose line and sentinel fit one atomic pipe write (4096 bytes) goes to the session', () => {
  const script = (bytes: number) => `add element ip kproxy s { ${'1'.repeat(bytes)} }\n`;
  const sizes = Array.from({ length: 4200 }, (_, n) => n).filter((n) => fitsSession(script(n)));
  const largest = Math.max(...sizes);
  assert.equal(sizes.length, largest + 1, 'every shorter script fits too');
  // Its line, the sentinel's line ("list table ip kproxy-end-PID-SEQUENCE") and both newlines.
  const written = `${oneLine(script(largest))}\nlist table ip kproxy-end-${process.pid}-${Number.MAX_SAFE_INTEGER}\n`;
  assert.equal(Buffer.byteLength(written), 4096);
  assert.equal(fitsSession(`${script(largest)}# é\n`), false, 'bytes, not characters, are counted');
});

describe('nft -i session on the kernel', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let ns: string;
  let session: NftSession;
  const runner = () => execaRunner(['ip', 'netns', 'exec', ns]);
  const listSet = async () => (await lab.exec(ns, 'nft', ['list', 'set', 'ip', 'kproxy', 's'])).stdout;

  before(async () => {
    lab = new Lab('nftsess');
    ns = await lab.addNetns('node');
    await lab.exec(ns, 'nft', ['-f', '-'], {
      input: 'add table ip kproxy\nadd set ip kproxy s { type ipv4_addr ; }\n',
    });
    const spawn = runner().spawn!;
    session = new NftSession(() => spawn('nft', ['-i']));
  });
  after(async () => {
    session?.close();
    await lab?.destroy();
  });

  test('transactions are committed in order, each one atomic', async () => {
    await session.run(elements(new NftTransaction(), ['10.0.0.1', '10.0.0.2']).toString());
    await session.run(
      elements(new NftTransaction().deleteElements('ip', 's', [{ key: '10.0.0.1' }]), [
        '10.0.0.3',
      ]).toString(),
    );
    const listed = await listSet();
    assert.match(listed, /10\.0\.0\.2/);
    assert.match(listed, /10\.0\.0\.3/);
    assert.doesNotMatch(listed, /10\.0\.0\.1\b/);
  });

  test('a refused transaction throws NftError with nft message, changes nothing, and the session goes on', async () => {
    const refused = elements(new NftTransaction(), ['10.0.0.9'])
      .deleteElements('ip', 's', [{ key: '10.9.9.9' }])
      .toString();
    await assert.rejects(session.run(refused), (error: unknown) => {
      assert.ok(error instanceof NftError);
      assert.equal(error.kind, 'not-found');
      assert.match(error.message, /10\.9\.9\.9/);
      return true;
    });
    assert.doesNotMatch(
      await listSet(),
      /10\.0\.0\.9/,
      'the add of the refused transaction was not committed',
    );
    await session.run(elements(new NftTransaction(), ['10.0.0.4']).toString());
    assert.match(await listSet(), /10\.0\.0\.4/);
  });

  test('a transaction that does not come back in time fails, its session is killed, and the next one starts afresh', async () => {
    const spawn = runner().spawn!;
    const stuck: number[] = [];
    let nftStuck = true;
    // A stand-in for a wedged nft: it reads nothing and answers nothing. The same session then runs
    // a real nft within the bound: `ip netns exec` and `nft -i` started and one small transaction,
    // ~30 ms of CPU and a few process wake-ups (~1 s measured at load 50, so ~0.2 s at the design
    // load, harness/emulation.ts); 1 s there.
    const timeoutMs = allowance(1_000);
    const flaky = new NftSession(
      () => {
        const child = nftStuck ? spawn('sleep', ['600']) : spawn('nft', ['-i']);
        if (nftStuck) stuck.push(child.pid!);
        return child;
      },
      { timeoutMs },
    );
    const started = Date.now();
    await assert.rejects(
      flaky.run(elements(new NftTransaction(), ['10.0.0.7']).toString()),
      (error: unknown) => {
        assert.ok(error instanceof CommandTimeoutError);
        assert.equal(
          error.message,
          `nft -i transaction did not finish within ${timeoutMs / 1000} s and was killed`,
        );
        return true;
      },
    );
    assert.ok(Date.now() - started >= timeoutMs, 'not before its time');
    // Killed with SIGKILL at the timeout: gone once the kernel schedules it (a scheduler period,
    // ~12 ms at the design load); the deadline bounds a hang.
    const deadline = Date.now() + allowance(5_000);
    while (processAlive(stuck[0]!) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(processAlive(stuck[0]!), false, 'the stuck session was killed');
    nftStuck = false;
    await flaky.run(elements(new NftTransaction(), ['10.0.0.8']).toString());
    assert.match(await listSet(), /10\.0\.0\.8/);
    flaky.close();
  });

  test('a session whose nft went away starts a new one for the next transaction', async () => {
    session.close();
    await session.run(elements(new NftTransaction(), ['10.0.0.5']).toString());
    assert.match(await listSet(), /10\.0\.0\.5/);
  });
});
