// Tests that need a tool this machine may lack (scripts/test.sh installs them when run as root).
import { execFileSync } from 'node:child_process';
import type { TestContext } from 'node:test';

/** Whether `name` is a command on PATH. */
export function hasCommand(name: string): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v "$1"', 'sh', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Skips `t` unless every command exists, with a line on stderr so that a skip shows in CI's log.
 * True when skipped: the test returns.
 */
export function skipWithout(t: TestContext, commands: readonly string[], install: string): boolean {
  const missing = commands.filter((c) => !hasCommand(c));
  if (missing.length === 0) return false;
  const reason = `needs ${missing.join(', ')} (${install})`;
  process.stderr.write(`SKIPPED ${t.name}: ${reason}\n`);
  t.skip(reason);
  return true;
}
