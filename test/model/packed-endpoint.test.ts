import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { PackedEndpoint } from '../../src/model/packed-endpoint.ts';

const FLAGS = { isLocal: false, ready: true, serving: true, terminating: false };

describe('PackedEndpoint', () => {
  it('gives back every address as written, IPv4 stored as a number', () => {
    for (const ip of [
      '10.244.0.1',
      '0.0.0.0',
      '127.0.0.1',
      '128.0.0.1',
      '192.168.10.200',
      '255.255.255.255',
    ]) {
      const endpoint = new PackedEndpoint(ip, 8080, FLAGS);
      assert.equal(endpoint.ip, ip);
      assert.equal(typeof endpoint.address, 'number', ip);
    }
    // Anything but a canonical dotted quad is kept as text, so it too comes back as written.
    for (const ip of ['fd00::1', '2001:db8::10', '01.2.3.4', '1.2.3', '1.2.3.4.5', '256.0.0.1', '1..2.3']) {
      const endpoint = new PackedEndpoint(ip, 8080, FLAGS);
      assert.equal(endpoint.ip, ip);
      assert.equal(typeof endpoint.address, 'string', ip);
    }
  });

  it('keeps the port and each condition apart', () => {
    for (const port of [1, 53, 8080, 65535]) {
      for (let bits = 0; bits < 16; bits++) {
        const conditions = {
          isLocal: (bits & 1) !== 0,
          ready: (bits & 2) !== 0,
          serving: (bits & 4) !== 0,
          terminating: (bits & 8) !== 0,
        };
        const endpoint = new PackedEndpoint('10.244.1.5', port, conditions);
        const { isLocal, ready, serving, terminating } = endpoint;
        assert.deepEqual(
          { port: endpoint.port, isLocal, ready, serving, terminating },
          { port, ...conditions },
        );
      }
    }
  });

  it('compares by value under isDeepStrictEqual (the model keeps unchanged ports by it)', () => {
    const a = new PackedEndpoint('10.244.1.5', 8080, FLAGS);
    assert.ok(isDeepStrictEqual(a, new PackedEndpoint('10.244.1.5', 8080, FLAGS)));
    assert.ok(!isDeepStrictEqual(a, new PackedEndpoint('10.244.1.6', 8080, FLAGS)));
    assert.ok(!isDeepStrictEqual(a, new PackedEndpoint('10.244.1.5', 8081, FLAGS)));
    assert.ok(!isDeepStrictEqual(a, new PackedEndpoint('10.244.1.5', 8080, { ...FLAGS, ready: false })));
  });
});
