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
 * How many times slower than the machine the deadlines were made for, never below 1: KPROXY_SLOWDOWN
 * when set (the VM's), else the host's load per core over the design load's, from the load average
 * when the test file starts (the larger of the 1- and 5-minute ones: a load that has just dipped
 * comes back).
 */
export function slowdownOf(env: string | undefined, load: readonly number[], cores: number): number {
  const factor = Number(env);
  if (env !== undefined && Number.isFinite(factor)) return Math.max(1, factor);
  const [oneMinute = 0, fiveMinutes = 0] = load;
  return Math.max(1, Math.max(oneMinute, fiveMinutes) / cores / DESIGN_LOAD_PER_CORE);
}

/** This process's slowdown (slowdownOf): 1 at or below the design load outside the VM. */
export const SLOWDOWN = slowdownOf(process.env.KPROXY_SLOWDOWN, loadavg(), availableParallelism());

/**
 * A deadline made for the design load, stretched for emulation or a busier host: whole
 * milliseconds, as execa's `timeout` (which refuses a fraction) and the daemons' flags take them.
 */
export function allowance(ms: number): number {
  return Math.ceil(ms * SLOWDOWN);
}
