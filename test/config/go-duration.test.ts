import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatGoDuration, parseGoDuration } from '../../src/config/go-duration.ts';

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
    ['-5s', -5000],
    ['-0s', 0],
  ];
  for (const [text, ms] of cases) assert.equal(parseGoDuration(text), ms, text);
});

test('text that is not a Go duration is rejected', () => {
  for (const text of ['', '30', 's', '30 s', '1d', '-', '--5s', '5s ', 'abc', '1m0', '+']) {
    assert.equal(parseGoDuration(text), undefined, JSON.stringify(text));
  }
});

test("durations print as Go's Duration.String() prints them", () => {
  const cases: [number, string][] = [
    [0, '0s'],
    [30_000, '30s'],
    [60_000, '1m0s'],
    [5_400_000, '1h30m0s'],
    [86_400_000, '24h0m0s'],
    [1500, '1.5s'],
    [90_500, '1m30.5s'],
    [500, '500ms'],
    [1.5, '1.5ms'],
    [0.25, '250µs'],
    [0.000001, '1ns'],
    [-5000, '-5s'],
  ];
  for (const [ms, text] of cases) assert.equal(formatGoDuration(ms), text, String(ms));
  // What it prints parses back to the same duration.
  for (const [ms] of cases) assert.equal(parseGoDuration(formatGoDuration(ms)), ms);
});
