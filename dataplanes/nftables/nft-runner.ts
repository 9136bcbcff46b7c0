// Running nft behind a small interface: the live dataplane feeds it scripts and reads tables back;
// unit tests swap in a recorder, kernel tests run it inside a throwaway namespace.
import type { CommandRunner } from '../shared/command-runner.ts';
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
  /** `nft -j list table FAMILY kproxy`, parsed; undefined when the table does not exist. */
  listTableJson(family: NftFamily): Promise<unknown>;
  /** `nft -j list tables`, parsed (cheap: no chains, sets or elements are fetched). */
  listTablesJson(): Promise<unknown>;
}

export function commandNftRunner(runner: CommandRunner): NftRunner {
  const json = async (args: readonly string[], what: string): Promise<unknown> => {
    const result = await runner.run('nft', ['-j', ...args]);
    if (result.exitCode !== 0) throw new NftError(what, result.stderr);
    return JSON.parse(result.stdout);
  };
  return {
    async run(script) {
      const result = await runner.run('nft', ['-f', '-'], script);
      if (result.exitCode !== 0) throw new NftError('-f', result.stderr);
    },
    async listTableJson(family) {
      try {
        return await json(['list', 'table', family, TABLE], `list table ${family} ${TABLE}`);
      } catch (error) {
        if (error instanceof NftError && error.kind === 'not-found') return undefined;
        throw error;
      }
    },
    listTablesJson: () => json(['list', 'tables'], 'list tables'),
  };
}
