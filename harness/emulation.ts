// Timing allowances for the labs and kernel tests. Every deadline is for a real machine at the
// design load (DESIGN_LOAD_PER_CORE): the CPU time its steps take, times what that load makes of it,
// times a margin. SLOWDOWN stretches them where the machine is slower than that:
// - under TCG emulation in the qemu VM (harness/vm.ts, no KVM) every instruction is emulated, and
//   process starts, which those deadlines are mostly made of, take ~7-13× as long (measured on a
//   loaded 2-core host: `node -e 0` 2.2 s vs 0.3 s, `kproxy --help` 26 s vs 2 s, ~35× for a first
//   start with a cold compile cache). The VM harness sets KPROXY_SLOWDOWN.
// - on a host busier than the design load, in proportion: a shared machine's other work
//   (benchmarks, seed sweeps, VMs) is not the suite's to bound.
import { availableParallelism, loadavg } from 'node:os';

/**
 * The load the deadlines are made for: CI's busy 2-core machines, with `npm test`'s own processes
 * and two CPU hogs beside it (issue 26) at a load of ~10, i.e. 5 runnable tasks a core, where a
 * process gets a fifth of a core: a step that takes 1 s of CPU takes ~5 s.
 */
export const DESIGN_LOAD_PER_CORE = 5;

/**
 * How many times slower than the design load this machine is, from the load average when the test
 * file starts (the larger of the 1- and 5-minute ones: a load that has just dipped comes back).
 */
function busyHost(): number {
  const [oneMinute = 0, fiveMinutes = 0] = loadavg();
  return Math.max(oneMinute, fiveMinutes) / availableParallelism() / DESIGN_LOAD_PER_CORE;
}

const factor = Number(process.env.KPROXY_SLOWDOWN);

/** How many times slower than the machine the deadlines were made for: 1 at or below the design load. */
export const SLOWDOWN = Math.max(1, Number.isFinite(factor) ? factor : busyHost());

/** A deadline made for the design load, stretched for emulation or a busier host. */
export function allowance(ms: number): number {
  return ms * SLOWDOWN;
}
