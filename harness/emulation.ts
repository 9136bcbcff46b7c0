// Timing allowances inside the qemu VM (harness/vm.ts). Every deadline in the labs and kernel tests
// was measured on a real machine; under TCG emulation (no KVM) every instruction is emulated, and
// process starts, which those deadlines are mostly made of, take ~7-13× as long (measured on a
// loaded 2-core host: `node -e 0` 2.2 s vs 0.3 s, `kproxy --help` 26 s vs 2 s, ~35× for a first
// start with a cold compile cache). The VM harness sets KPROXY_SLOWDOWN; elsewhere it is 1.
const factor = Number(process.env.KPROXY_SLOWDOWN);

/** How many times slower than the machine the deadlines were measured on: 1 outside the VM. */
export const SLOWDOWN = Number.isFinite(factor) && factor >= 1 ? factor : 1;

/** A deadline measured on a real machine, stretched for emulation. */
export function allowance(ms: number): number {
  return ms * SLOWDOWN;
}
