// Running nft behind a small interface: the live dataplane feeds it scripts and reads tables back;
// unit tests swap in a recorder, kernel tests run it inside a throwaway namespace.
import type { CommandRunner } from '../shared/command-runner.ts';
import { NftSession } from './nft-session.ts';
import { type NftFamily, TABLE } from './transaction.ts';

/** Why nft failed, so callers decide on a kind of failure rather than on message text. */
export type NftErrorKind = 'not-found' | 'exists' | 'busy' | 'other';

export class NftError extends Error {
  readonly kind: NftErrorKind;
  readonly stderr: string;
  constructor(what: string, stderr: string) {
    super(`nft ${what} failed: ${stderr.trim()}`);
    this.name = 'NftError';
    this.stderr = stderr;
    this.kind = /No such file or directory/.test(stderr)
      ? 'not-found'
      : /File exists/.test(stderr)
        ? 'exists'
        : /Device or resource busy/.test(stderr)
          ? 'busy'
          : 'other';
  }
}

export interface NftRunner {
  /** Runs one script as one transaction (`nft -f -`); throws NftError when nft refuses it. */
  run(script: string): Promise<void>;
  /** `nft -j list chains FAMILY`, parsed (every table's chains, no rules): ~30 ms at any size. */
  listChainsJson(family: NftFamily): Promise<unknown>;
  /**
   * `nft -j list set|map FAMILY kproxy NAME`, parsed; undefined when it does not exist. Costs what
   * its elements cost, unlike `list table` or `list chain`, which nft 1.0.6 answers after fetching
   * every element of the table.
   */
  listSetJson(family: NftFamily, name: string, kind?: 'set' | 'map'): Promise<unknown>;
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
 * Scripts up to this size go to a persistent `nft -i` (nft-session.ts) when the runner can start
 * one: ~2 ms instead of 10-25 ms per transaction. Full syncs (megabytes) go to `nft -f -`.
 */
const SESSION_MAX_SCRIPT = 256 * 1024;

export function commandNftRunner(runner: CommandRunner): NftRunner {
  const spawn = runner.spawn?.bind(runner);
  const session = spawn && new NftSession(() => spawn('nft', ['-i']));
  const json = async (args: readonly string[], what: string): Promise<unknown> => {
    const result = await runner.run('nft', ['-j', ...args]);
    if (result.exitCode !== 0) throw new NftError(what, result.stderr);
    return JSON.parse(result.stdout);
  };
  return {
    async run(script) {
      if (session && script.length <= SESSION_MAX_SCRIPT) return session.run(script);
      const result = await runner.run('nft', ['-f', '-'], script);
      if (result.exitCode !== 0) throw new NftError('-f', result.stderr);
    },
    listChainsJson: (family) => json(['list', 'chains', family], `list chains ${family}`),
    listSetJson: (family, name, kind = 'set') =>
      unlessMissing(json(['list', kind, family, TABLE, name], `list ${kind} ${family} ${TABLE} ${name}`)),
  };
}
