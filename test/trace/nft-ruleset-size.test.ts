// The nft parser at kproxy's scale: a map of 300,000 elements (30,000 Services x 10 endpoints, as
// `kproxy diff` and `trace --live` read kproxy's table) in both forms it reads, the kernel's listing
// and the script.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseNftRuleset } from '../../dataplanes/shared/trace/nft-ruleset.ts';

const ELEMENTS = 300_000;

function element(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255} . 80 . 0 : 10.244.0.1 . 8080`;
}

test('a map of 300,000 elements, listed and as a script', () => {
  const elements = Array.from({ length: ELEMENTS }, (_, i) => element(i));
  const type = 'type ipv4_addr . inet_service . inet_service : ipv4_addr . inet_service';
  const listing = `table ip kproxy {\n\tmap m {\n\t\t${type}\n\t\telements = { ${elements.join(',\n\t\t\t')} }\n\t}\n}\n`;
  const script = `add table ip kproxy\nadd map ip kproxy m { ${type} ; }\nadd element ip kproxy m {\n${elements.map((e) => `\t${e},\n`).join('')}}\n`;
  for (const [form, text] of [
    ['listing', listing],
    ['script', script],
  ] as const) {
    const map = parseNftRuleset(text).tables.get('ip kproxy')?.sets.get('m');
    assert.equal(map?.elements.length, ELEMENTS, form);
    assert.deepEqual(map.elements.at(-1)?.value, ['10.244.0.1', '8080'], form);
  }
});
