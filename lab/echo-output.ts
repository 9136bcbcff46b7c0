// Reading harness/echo-client.ts output, whichever lab ran it: one JSON line per attempt,
// and for --hold a greeting line then one {"echo":...} line per echoed tick.
import { setTimeout as sleep } from 'node:timers/promises';
import { type EchoOutcome, HOLD_TICK_MS } from '../harness/echo-client.ts';
import type { HeldConnection, Outcome } from './driver.ts';

/** "10.0.0.1:5000" or "[fd00::1]:5000" → the address. */
export function addressOf(peer: string): string {
  return peer.startsWith('[') ? peer.slice(1, peer.indexOf(']')) : peer.slice(0, peer.lastIndexOf(':'));
}

export function toOutcome(o: EchoOutcome): Outcome {
  return 'error' in o ? { error: o.error } : { backend: o.name, sourceIp: addressOf(o.peer) };
}

/** echo-client's stdout → one outcome per attempt. */
export function parseOutcomes(stdout: string): Outcome[] {
  return stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('{'))
    .map((l) => toOutcome(JSON.parse(l) as EchoOutcome));
}

/**
 * How long alive() waits for two more echoes. The client ticks every HOLD_TICK_MS, so a live
 * connection echoes two within ~0.2 s; 50 ticks leave room for a loaded machine (a starved client
 * or echo server), and a broken connection usually shows at once as an "error" line anyway.
 */
export const ALIVE_WITHIN_MS = 50 * HOLD_TICK_MS;

/** A held connection over a running `echo-client --hold`, once its greeting is printed. */
export function heldConnection(output: () => string, kill: () => Promise<void>): HeldConnection {
  const greeting = output()
    .split('\n')
    .find((l) => l.includes('"name"'));
  const backend = greeting ? (JSON.parse(greeting) as { name: string }).name : '?';
  const echoes = () => output().split('"echo"').length;
  const broken = () => output().includes('"error"');
  return {
    backend,
    async alive() {
      const before = echoes();
      const deadline = Date.now() + ALIVE_WITHIN_MS;
      while (!broken() && echoes() < before + 2 && Date.now() < deadline) await sleep(HOLD_TICK_MS);
      return !broken() && echoes() >= before + 2;
    },
    close: kill,
  };
}
