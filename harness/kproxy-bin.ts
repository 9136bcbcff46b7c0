// The file the tests and labs run kproxy with: bin/kproxy.ts, or in the qemu VM's guest the same
// sources built into one file before the boot (harness/vm.ts sets KPROXY_BIN), which starts there in
// about half the time.
import { fileURLToPath } from 'node:url';

export const KPROXY_BIN =
  process.env.KPROXY_BIN ?? fileURLToPath(new URL('../bin/kproxy.ts', import.meta.url));
