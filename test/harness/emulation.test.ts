// The one slowdown factor of the kernel tests' deadlines (harness/emulation.ts): the VM's when set,
// else the host's load beyond the design load, never below 1.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DESIGN_LOAD_PER_CORE, slowdownOf } from '../../harness/emulation.ts';

test('the VM sets the factor, whatever the load', () => {
  assert.equal(slowdownOf('15', [0.5, 0.5, 0.5], 1), 15);
  assert.equal(slowdownOf('1', [80, 80, 80], 2), 1, 'a factor of 1 asked for keeps the deadlines as made');
});

test('outside the VM: the load per core over the design load, from the larger of the 1- and 5-minute loads', () => {
  const design = 2 * DESIGN_LOAD_PER_CORE;
  assert.equal(slowdownOf(undefined, [design, design, 0], 2), 1, 'the design load itself');
  assert.equal(slowdownOf(undefined, [4 * design, 0, 0], 2), 4, 'a load rising');
  assert.equal(slowdownOf(undefined, [design / 2, 3 * design, 0], 2), 3, 'a load that has just dipped');
  assert.equal(slowdownOf(undefined, [4 * design, 4 * design, 0], 4), 2, 'twice the cores');
});

test('never below 1: a quiet machine keeps the deadlines as made', () => {
  assert.equal(slowdownOf(undefined, [0.1, 0.2, 0.3], 2), 1);
  assert.equal(slowdownOf(undefined, [], 2), 1);
  assert.equal(slowdownOf('0.5', [0, 0, 0], 2), 1);
});
