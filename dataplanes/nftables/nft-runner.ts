// Running nft behind a small interface: the live dataplane feeds it scripts and reads tables back;
// unit tests swap in a recorder, kernel tests run it inside a throwaway namespace.

import type { CommandRunner } from '../shared/command-runner.ts';
import { type NftFamily, TABLE } from '../shared/nft/transaction.ts';
import { NftError } from './nft-error.ts';
import { fitsSession, NftSession } from './nft-session.ts';

export interface NftRunner {
  /** Runs one script as one transaction (`nft -f -`); throws NftError when nft refuses it. */
  run(script: string): Promise<void>;
  /** `nft -j list chains FAMILY`, parsed (every table's chains, no rules): ~30 ms at any size. */
  listChainsJson(family: NftFamily): Promise<unknown>;
  /**
   * `nft -j list set FAMILY kproxy NAME`, parsed; undefined when it does not exist. Costs what
   * its elements cost, unlike `list table` or `list chain`, which nft 1.0.6 answers after fetching
   * every element of the table.
   */
  listSetJson(family: NftFamily, name: string): Promise<unknown>;
  /**
   * `nft -c -f -`: whether the kernel accepts the script, committing nothing. ~10 ms at any size
   * (no element is fetched), plus what the script names (intact-check.ts).
   */
  check(script: string): Promise<boolean>;
  /**
   * Ends the persistent `nft -i` session, if one runs (the next small script starts another). An
   * idle session holds its network namespace: whoever drops a runner before its process ends closes it.
   */
  close?(): void;
}

async function unlessMissing(listing: Promise<unknown>): Promise<unknown> {
  try {
    return await listing;
  } catch (error) {
    if (error instanceof NftError && error.kind === 'not-found') return undefined;
    throw error;
  }
}

/**
 * Small scripts (up to one atomic pipe write, fitsSession) go to a persistent `nft -i`
 * (nft-session.ts) when the runner can start one: ~2 ms instead of 10-25 ms per transaction. The
 * rest go to `nft -f -`, whose stdin the runner makes a complete file, never a pipe.
 * `sessionTimeoutMs`: per session transaction (default SESSION_TRANSACTION_TIMEOUT_MS); tests shorten it.
 */
export function commandNftRunner(
  runner: CommandRunner,
  options: { readonly sessionTimeoutMs?: number } = {},
): NftRunner {
  const spawn = runner.spawn?.bind(runner);
  const session =
    spawn && new NftSession(() => spawn('nft', ['-i']), { timeoutMs: options.sessionTimeoutMs });
  const json = async (args: readonly string[], what: string): Promise<unknown> => {
    const result = await runner.run('nft', ['-j', ...args]);
    if (result.exitCode !== 0) throw new NftError(what, result.stderr);
    return JSON.parse(result.stdout);
  };
  return {
    async run(script) {
      if (session && fitsSession(script)) return session.run(script);
      const result = await runner.run('nft', ['-f', '-'], script);
      if (result.exitCode !== 0) throw new NftError('-f', result.stderr);
    },
    async check(script) {
      return (await runner.run('nft', ['-c', '-f', '-'], script)).exitCode === 0;
    },
    listChainsJson: (family) => json(['list', 'chains', family], `list chains ${family}`),
    listSetJson: (family, name) =>
      unlessMissing(json(['list', 'set', family, TABLE, name], `list set ${family} ${TABLE} ${name}`)),
    close: () => session?.close(),
  };
}
