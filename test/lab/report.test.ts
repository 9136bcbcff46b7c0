import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatComparison } from '../../lab/report.ts';

test('the comparison has a row per scenario and a column per lab, and explains every failure with its evidence', () => {
  const text = formatComparison([
    {
      lab: 'netns/nftables',
      results: [
        {
          scenario: 'udp',
          passed: true,
          checks: [{ what: 'w', passed: true, evidence: 'e' }],
          convergeMs: [40, 250],
        },
        {
          scenario: 'etp-local',
          passed: false,
          checks: [
            { what: 'node-1: nothing answers', passed: false, evidence: 'node-0-pod-0×3' },
            { what: 'node-0 answers', passed: true, evidence: 'fine' },
          ],
          convergeMs: [],
        },
      ],
      notes: ['daemon syncs: 2 full syncs'],
    },
    { lab: 'netns/iptables', results: [{ scenario: 'udp', passed: true, checks: [], convergeMs: [] }] },
  ]);
  const lines = text.split('\n');
  assert.match(lines[0]!, /^scenario\s+netns\/nftables\s+netns\/iptables$/);
  assert.match(lines[1]!, /^udp\s+PASS 250ms\s+PASS$/);
  assert.match(lines[2]!, /^etp-local\s+FAIL\s+n\/a \(not run\)$/);
  assert.ok(text.includes('netns/nftables: daemon syncs: 2 full syncs'));
  assert.ok(text.includes('netns/nftables etp-local FAILED\n  ✗ node-1: nothing answers: node-0-pod-0×3'));
  assert.ok(!text.includes('node-0 answers'), 'passed checks are not listed');
});
