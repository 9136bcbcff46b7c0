// nft's refusal, classified, for the runner and the session that both run nft.
import { DataplaneError } from '../../contract/dataplane-error.ts';

/** Why nft failed, so callers decide on a kind of failure rather than on message text. */
export type NftErrorKind = 'not-found' | 'exists' | 'busy' | 'other';

export class NftError extends DataplaneError {
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
