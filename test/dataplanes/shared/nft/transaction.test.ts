import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fitComment, NftTransaction } from '../../../../dataplanes/shared/nft/transaction.ts';

test('the string form is the nft script, one command per verb, many elements in one command', () => {
  const tx = new NftTransaction()
    .addChain('ip', { name: 'c', comment: 'why', rules: [] })
    .addRule('ip', 'c', 'reject')
    .addElements('ip', 'm', [
      { key: '10.0.0.1 . tcp . 80', value: 'goto c', comment: 'ns/a:80/TCP' },
      { key: '10.0.0.2 . tcp . 80', value: 'drop' },
    ])
    .deleteElements('ip', 'm', [{ key: '10.0.0.3 . tcp . 80', value: 'drop' }]);
  assert.equal(
    tx.toString(),
    'add chain ip kproxy c { comment "why" ; }\n' +
      'add rule ip kproxy c reject\n' +
      'add element ip kproxy m {\n\t10.0.0.1 . tcp . 80 comment "ns/a:80/TCP" : goto c,\n\t10.0.0.2 . tcp . 80 : drop,\n}\n' +
      'delete element ip kproxy m { 10.0.0.3 . tcp . 80 }\n',
  );
});

test('bad names, quotes in comments and multi-line rules are refused when added', () => {
  assert.throws(
    () => new NftTransaction().addChain('ip', { name: 'a b', rules: [] }),
    /not a valid identifier/,
  );
  assert.throws(() => new NftTransaction().addTable('ip', 'say "hi"'), /quote/);
  assert.throws(() => new NftTransaction().addRule('ip', 'c', 'accept\ndrop'), /multi-line/);
  assert.equal(new NftTransaction().addElements('ip', 'm', []).empty, true);
});

test('comments are cut to the 128 bytes nft accepts', () => {
  assert.equal(Buffer.byteLength(fitComment('x'.repeat(300))), 128);
  assert.equal(fitComment('a "b"'), "a 'b'");
});

test('the script in parts (for rendering in slices) joins to exactly the script', () => {
  const many = Array.from({ length: 2500 }, (_, i) => ({
    key: `10.0.${i >> 8}.${i & 255}`,
    comment: `e${i}`,
  }));
  const tx = new NftTransaction()
    .addTable('ip')
    .addSet('ip', { name: 'ips', kind: 'set', type: 'type ipv4_addr' })
    .addElements('ip', 'ips', many)
    .deleteElements('ip', 'ips', many.slice(0, 1500))
    .addElements('ip', 'ips', many.slice(0, 1));
  const parts = [...tx.scriptParts()];
  assert.equal(parts.join(''), tx.toString());
  assert.ok(parts.length > 6, 'large element lists are not split into parts');
});
