import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { readAllText } from '../../src/cli/io.ts';

test('stdin text survives a multi-byte character split across chunks', async () => {
  const bytes = new TextEncoder().encode('name: café-☕\n');
  const chunks = [bytes.slice(0, 9), bytes.slice(9, 13), bytes.slice(13)];
  assert.equal(await readAllText(Readable.from(chunks)), 'name: café-☕\n');
});

test('string chunks are joined as they are', async () => {
  assert.equal(await readAllText(Readable.from(['a: 1\n', '---\n', 'b: 2\n'])), 'a: 1\n---\nb: 2\n');
});
