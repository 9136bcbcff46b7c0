import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseGoDuration } from '../../src/config/go-duration.ts';

test('Go durations become milliseconds', () => {
  const cases: [string, number][] = [
    ['30s', 30_000],
    ['1m0s', 60_000],
    ['1h30m', 5_400_000],
    ['500ms', 500],
    ['1.5s', 1500],
    ['24h0m0s', 86_400_000],
    ['0s', 0],
    ['0', 0],
    ['250us', 0.25],
  ];
  for (const [text, ms] of cases) assert.equal(parseGoDuration(text), ms, text);
});

test('text that is not a Go duration is rejected', () => {
  for (const text of ['', '30', 's', '30 s', '1d', '-5s', '5s ', 'abc', '1m0', '+']) {
    assert.equal(parseGoDuration(text), undefined, JSON.stringify(text));
  }
});
