// A recording NftRunner for unit tests: keeps every script, fails on demand, and answers the
// listings with canned JSON.
import { NftError } from '../../../dataplanes/nftables/nft-error.ts';
import type { NftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import type { CommandResult, CommandRunner } from '../../../dataplanes/shared/command-runner.ts';
import type { NftFamily } from '../../../dataplanes/shared/nft/transaction.ts';

export class RecordingNftRunner implements NftRunner {
  readonly scripts: string[] = [];
  /** Scripts to refuse, by predicate (each used once). */
  readonly failures: ((script: string) => boolean)[] = [];
  /** What `list chains FAMILY` answers. */
  chains: Partial<Record<NftFamily, unknown>> = {};
  /** What `list set ... canary` answers; by default the nonce of the last script that set one. */
  canary: Partial<Record<NftFamily, number>> | undefined;

  async run(script: string): Promise<void> {
    const failure = this.failures.findIndex((f) => f(script));
    if (failure >= 0) {
      this.failures.splice(failure, 1);
      throw new NftError('-f', 'Error: Could not process rule: No such file or directory');
    }
    this.scripts.push(script);
  }

  async listChainsJson(family: NftFamily): Promise<unknown> {
    return this.chains[family] ?? { nftables: [] };
  }

  async listSetJson(family: NftFamily, name: string): Promise<unknown> {
    const nonce = this.canary ? this.canary[family] : this.#lastNonce(family);
    return nonce === undefined ? undefined : { nftables: [{ set: { family, name, elem: [nonce] } }] };
  }

  /** Check scripts (`nft -c`), answered from the canary alone: true when each nonce named is there. */
  readonly checks: string[] = [];

  async check(script: string): Promise<boolean> {
    this.checks.push(script);
    const named = [...script.matchAll(/^delete element (ip6?) kproxy canary \{ (\d+) \}$/gm)];
    if (named.length === 0) return false;
    for (const [, family, nonce] of named) {
      const answer = (await this.listSetJson(family as NftFamily, 'canary')) as
        | { nftables: { set: { elem: number[] } }[] }
        | undefined;
      if (answer?.nftables[0]?.set.elem[0] !== Number(nonce)) return false;
    }
    return true;
  }

  #lastNonce(family: NftFamily): number | undefined {
    const pattern = new RegExp(`^add element ${family} kproxy canary \\{ (\\d+) \\}$`, 'm');
    const match = this.scripts.findLast((s) => pattern.test(s))?.match(pattern);
    return match ? Number(match[1]) : undefined;
  }
}

export class RecordingCommandRunner implements CommandRunner {
  readonly calls: string[][] = [];
  async run(command: string, args: readonly string[]): Promise<CommandResult> {
    this.calls.push([command, ...args]);
    return { stdout: '', stderr: '1 flow entries have been deleted.\n', exitCode: 0 };
  }
}
