// `kproxy version`, `kproxy --version` and `kproxy run --version` (kube-proxy's flag) print the same line.
import { readFileSync } from 'node:fs';
import type { CliIO } from './io.ts';

/** Prints kproxy's version; returns the exit code, 0. */
export function printVersion(io: CliIO): number {
  const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  io.stdout.write(`kproxy ${packageJson.version}\n`);
  return 0;
}
