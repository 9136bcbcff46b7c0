// kproxy's tables read in pieces for the drift check (streamed-listing.ts, listed-elements.ts): each
// set's elements as the whole-listing parser reads them, whatever the pieces' boundaries, and the
// rest of the table (chains, set declarations) as that parser reads it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CommandRunner } from '../../../../dataplanes/shared/command-runner.ts';
import { elementText, ListedElements } from '../../../../dataplanes/shared/drift/listed-elements.ts';
import { streamTables } from '../../../../dataplanes/shared/drift/streamed-listing.ts';
import { parseNftRuleset } from '../../../../dataplanes/shared/trace/nft-ruleset.ts';

/** Shapes nft 1.0.6 lists: elements over lines, several on a line, quoted commas and braces. */
const LISTING = `table ip kproxy {
	comment "kproxy"
	map cluster-endpoints {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "VIP . proto . port -> chain"
		elements = { 10.96.1.0 . tcp . 80 comment "ns0/svc,{0}:80/TCP" : goto backends-tcp-10,
			     10.96.2.0 . udp . 53 : goto backends-udp-2 }
	}
	set cluster-ips {
		type ipv4_addr
		elements = { 10.96.0.1, 10.96.0.10,
			     10.96.1.0 }
	}
	set firewall-allow {
		type ipv4_addr . inet_proto . inet_service . ipv4_addr
		flags interval
		elements = { 10.0.0.5 . tcp . 80 . 192.168.0.0/16, 10.0.0.5 . tcp . 80 . 10.1.0.0-10.1.0.9 }
	}
	set affinity-clients {
		type ipv4_addr . ipv4_addr
		flags dynamic,timeout
		timeout 3h
		elements = { 10.244.0.7 . 10.96.1.0 timeout 3h expires 2h59m58s }
	}
	set empty {
		type ipv4_addr
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
		fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap { tcp . 30080 : goto x, udp . 30053 : goto y }
	}
}
`;

/** A runner whose nft lists `text` (no runToFile: it is handed over whole). */
function listingRunner(text: string): CommandRunner {
  return {
    async run(command, args) {
      assert.deepEqual([command, ...args], ['nft', 'list', 'table', 'ip', 'kproxy']);
      return { stdout: text, stderr: '', exitCode: 0 };
    },
  };
}

test('each set holds the elements the whole-listing parser reads, the skeleton the rest', async () => {
  const listed = await streamTables(listingRunner(LISTING), 'kproxy', ['ip']);
  const whole = parseNftRuleset(LISTING).tables.get('ip kproxy')!;
  const skeleton = parseNftRuleset(listed.skeleton).tables.get('ip kproxy')!;
  for (const [name, set] of whole.sets) {
    const elements = listed.elements.get(`ip ${name}`);
    const texts = elements ? Array.from({ length: elements.size }, (_, i) => elements.text(i)) : [];
    assert.deepEqual(texts, set.elements.map(elementText), name);
    assert.deepEqual(skeleton.sets.get(name), { ...set, elements: [] }, name);
  }
  assert.equal(listed.elements.get('ip cluster-endpoints')?.size, 2);
  assert.deepEqual(skeleton.chains, whole.chains);
  assert.deepEqual(listed.unreadable, []);
});

test('a listing read back from its file in pieces: elements cut at any byte read whole', async () => {
  // Over a megabyte of elements (many 64 KiB pieces), with two-byte characters in the comments.
  const lines = Array.from(
    { length: 20_000 },
    (_, i) => `10.96.${i >> 8}.${i & 255} . tcp . 80 comment "ns/é${i}:80/TCP" : goto backends-tcp-10`,
  );
  const text = `table ip kproxy {
	map cluster-endpoints {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { ${lines.join(',\n\t\t\t     ')} }
	}
}
`;
  const runner: CommandRunner = {
    run: () => assert.fail('listed through run'),
    async runToFile(_command, _args, output) {
      await output.write(text);
      return { stdout: '', stderr: '', exitCode: 0 };
    },
  };
  const listed = await streamTables(runner, 'kproxy', ['ip']);
  const elements = listed.elements.get('ip cluster-endpoints')!;
  const whole = parseNftRuleset(text).tables.get('ip kproxy')!.sets.get('cluster-endpoints')!;
  assert.deepEqual(
    Array.from({ length: elements.size }, (_, i) => elements.text(i)),
    whole.elements.map(elementText),
  );
});

test('a missing table lists as nothing; another failure is named as not read', async () => {
  const failing = (stderr: string): CommandRunner => ({
    run: async () => ({ stdout: '', stderr, exitCode: 1 }),
  });
  const missing = await streamTables(failing('Error: No such file or directory'), 'kproxy', ['ip']);
  assert.deepEqual([missing.skeleton, missing.unreadable, missing.elements.size], ['', [], 0]);
  const refused = await streamTables(failing('Error: Operation not permitted'), 'kproxy', ['ip']);
  assert.deepEqual(refused.unreadable, ['table ip kproxy: Error: Operation not permitted']);
});

test('a rendered element matches the listed one spelled alike, once', () => {
  const elements = new ListedElements();
  // Enough to fill several pages of texts, and to share hashes' neighbourhoods.
  for (let i = 0; i < 20_000; i++)
    elements.add(`10.96.${i >> 8}.${i & 255} . 80 . 0 : 10.244.0.${i % 250} . 8080`);
  assert.equal(elements.text(19_999), '10.96.78.31 . 80 . 0 : 10.244.0.249 . 8080');
  // 10.96.3.7 is element 775, its value 10.244.0.25.
  assert.equal(elements.match('10.96.3.7 . 80 . 0 : 10.244.0.13 . 8080'), 'none', 'another value');
  assert.equal(elements.match('10.96.200.7 . 80 . 0 : 10.244.0.25 . 8080'), 'none', 'another key');
  assert.equal(elements.match('10.96.3.7 . 80 . 0 : 10.244.0.25 . 8080'), 'matched');
  assert.equal(elements.match('10.96.3.7 . 80 . 0 : 10.244.0.25 . 8080'), 'again', 'rendered twice');
  const position = 775;
  assert.equal(elements.isMatched(position), true);
  assert.equal(elements.isMatched(position + 1), false);
  elements.unmatchAll();
  assert.equal(elements.isMatched(position), false);
  assert.equal(elements.match('10.96.3.7 . 80 . 0 : 10.244.0.25 . 8080'), 'matched');
});
