import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalCIDR, canonicalIP } from '../../../contract/base/ip-address.ts';

describe('canonicalIP', () => {
  const cases: [string, string | undefined][] = [
    ['10.0.0.1', '10.0.0.1'],
    ['010.000.0.1', '10.0.0.1'],
    ['FD00:0:0::0001', 'fd00::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['10.0.0.300', undefined],
    ['10.1', undefined],
    ['0x0a.0.0.1', undefined],
    ['fe80::1%eth0', undefined],
    ['::ffff:10.0.0.1', undefined],
    ['', undefined],
    ['web.example.com', undefined],
  ];
  for (const [text, want] of cases) {
    it(`${JSON.stringify(text)} → ${want ?? 'not an IP'}`, () => {
      assert.equal(canonicalIP(text), want);
    });
  }
});

describe('canonicalCIDR', () => {
  const cases: [string, string | undefined][] = [
    ['10.244.0.0/16', '10.244.0.0/16'],
    ['10.244.1.7/16', '10.244.0.0/16'],
    ['FD00:244::1/56', 'fd00:244::/56'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['10.0.0.0/33', undefined],
    ['fd00::/129', undefined],
    ['10.0.0.1', undefined],
    ['10.0.0.0/', undefined],
    ['10.0.0.0/8/8', undefined],
  ];
  for (const [text, want] of cases) {
    it(`${JSON.stringify(text)} → ${want ?? 'not a CIDR'}`, () => {
      assert.equal(canonicalCIDR(text), want);
    });
  }
});
