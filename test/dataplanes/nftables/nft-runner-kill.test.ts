// A daemon killed (SIGKILL) while nft applies its script: the namespace holds the old ruleset or the
// new one, whole, never a prefix; and the nft it started dies with it, so no child of a dead daemon
// commits while a new one starts. A real process (feed-nft-main.ts) runs the real runner.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { allowance } from '../../../harness/emulation.ts';
import { Lab } from '../../../harness/netns.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: a network namespace and nft (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED nft runner kill tests: ${ROOT_REASON}\n`);

const FEEDER = new URL('./feed-nft-main.ts', import.meta.url).pathname;
/** Chains the new transaction adds: enough that nft works on it for about a second. */
const CHAINS = 20_000;
const OLD =
  'add table ip kproxy\nadd set ip kproxy s { type ipv4_addr ; }\nadd element ip kproxy s { 1.1.1.1 }\n';

/**
 * The old set emptied, then one chain per line with a long name, then a last chain: a script cut
 * almost anywhere (inside a name) is still a valid, shorter one, as a cut pipe would leave it.
 */
function newTransaction(): string {
  const lines = ['flush set ip kproxy s'];
  for (let i = 0; i < CHAINS; i++)
    lines.push(`add chain ip kproxy c${String(i).padStart(6, '0')}${'x'.repeat(200)}`);
  lines.push('add chain ip kproxy whole');
  return `${lines.join('\n')}\n`;
}

/** [pid, ppid, state] of every process, from /proc (no /proc/PID/task/TID/children on every kernel). */
function processes(): [number, number, string][] {
  const out: [number, number, string][] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push([Number(name), Number(ppid), state!]);
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

function comm(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Running, sleeping or stopped: anything but gone or a zombie. */
function alive(pid: number): boolean {
  const entry = processes().find(([p]) => p === pid);
  return entry !== undefined && entry[2] !== 'Z' && entry[2] !== 'X';
}

async function until<T>(what: string, boundMs: number, probe: () => T | undefined): Promise<T> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${boundMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('a daemon killed while nft applies its script', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let ns: string;
  let dir: string;
  let script: string;
  const strays: number[] = [];

  before(async () => {
    lab = new Lab('nftkill');
    ns = await lab.addNetns('node');
    dir = await mkdtemp(join(tmpdir(), 'kproxy-kill-test-'));
    script = join(dir, 'new.nft');
    await writeFile(script, newTransaction());
  });
  after(async () => {
    for (const pid of strays) if (alive(pid)) process.kill(pid, 'SIGKILL');
    await lab?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /**
   * Loads the old ruleset, starts the feeder and returns it with the PID of its nft. nft's
   * transaction takes ~1 s; a busy machine can keep this process from scanning /proc for longer
   * (at load ~44 a run waited out its whole bound for an nft long finished), so a feeder that
   * exits before its nft was seen is started again, a few times.
   */
  async function feederWithNft(): Promise<{ feeder: ChildProcess; exited: Promise<void>; nft: number }> {
    for (let attempt = 1; ; attempt++) {
      await lab.exec(ns, 'nft', ['flush', 'ruleset']);
      await lab.exec(ns, 'nft', ['-f', '-'], { input: OLD });
      const feeder = spawn(process.execPath, [FEEDER, ns, script], { stdio: ['ignore', 'pipe', 'inherit'] });
      let gone = false;
      const exited = new Promise<void>((resolve) => feeder.once('exit', () => resolve())).then(() => {
        gone = true;
      });
      // Node's start and the script's 4 MB written to a file take well under a second of CPU; 30 s
      // at the design load, stretched on a busier host (harness/emulation.ts). The runner's child is
      // setpriv, then ip, then nft: all one PID (each execs).
      const nft = await until('the feeder starts nft', allowance(30_000), () =>
        gone ? null : processes().find(([pid, ppid]) => ppid === feeder.pid && comm(pid) === 'nft')?.[0],
      );
      if (nft !== null) {
        strays.push(nft);
        return { feeder, exited, nft };
      }
      assert.ok(attempt < 5, 'the feeder finished before its nft was seen, 5 times');
    }
  }

  /** What the namespace holds: the old ruleset, the new one, or something else (a prefix). */
  async function ruleset(): Promise<'old' | 'new' | string> {
    const listed = JSON.parse(
      (await lab.exec(ns, 'nft', ['-j', 'list', 'table', 'ip', 'kproxy'])).stdout,
    ) as {
      nftables: { set?: { elem?: unknown[] }; chain?: { name: string } }[];
    };
    const elements = listed.nftables.find((o) => o.set)?.set?.elem?.length ?? 0;
    const chains = listed.nftables.filter((o) => o.chain).length;
    const whole = listed.nftables.some((o) => o.chain?.name === 'whole');
    if (elements === 1 && chains === 0) return 'old';
    if (elements === 0 && chains === CHAINS + 1 && whole) return 'new';
    return `${elements} elements, ${chains} chains, last one ${whole ? '' : 'not '}there`;
  }

  test('the namespace holds the old ruleset or the new one, whole, wherever the kill lands', async () => {
    for (const delayMs of [0, 100, 200, 400, 800]) {
      const { feeder, exited, nft } = await feederWithNft();
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      feeder.kill('SIGKILL');
      await exited;
      // The kernel killed nft as the feeder died (or nft had finished); the bound only covers a
      // loaded machine scheduling that kill, or nft finishing its ~1 s transaction.
      await until(`nft ${nft} ends`, allowance(30_000), () => (alive(nft) ? undefined : true));
      // Which of the two depends on the machine's speed; both are whole.
      const held = await ruleset();
      assert.ok(held === 'old' || held === 'new', `killed after ${delayMs} ms: ${held}`);
    }
  });

  test("the nft it started dies with it: the kernel's parent-death signal, not nft finishing", async () => {
    const { feeder, exited, nft } = await feederWithNft();
    // Stopped, nft would never finish or exit by itself; only a SIGKILL ends it.
    process.kill(nft, 'SIGSTOP');
    feeder.kill('SIGKILL');
    await exited;
    // The parent-death SIGKILL is sent as the feeder exits; 10 s covers scheduling it when loaded.
    await until(`nft ${nft} is killed with the feeder`, 10_000, () => (alive(nft) ? undefined : true));
    assert.equal(await ruleset(), 'old');
  });
});
