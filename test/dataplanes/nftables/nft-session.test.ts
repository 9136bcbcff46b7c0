// The persistent `nft -i` session: one transaction per line, errors told apart by the sentinel.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NftError } from '../../../dataplanes/nftables/nft-runner.ts';
import { NftSession, oneLine } from '../../../dataplanes/nftables/nft-session.ts';
import { NftTransaction } from '../../../dataplanes/nftables/transaction.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { Lab } from '../../support/netns.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: a network namespace and nft (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED nft session kernel tests: ${ROOT_REASON}\n`);

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

  test('a session whose nft went away starts a new one for the next transaction', async () => {
    session.close();
    await session.run(elements(new NftTransaction(), ['10.0.0.5']).toString());
    assert.match(await listSet(), /10\.0\.0\.5/);
  });
});
