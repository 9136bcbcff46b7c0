// Bearer tokens: a fixed one from a kubeconfig, or one read from a file that is rotated underneath
// us (projected service-account tokens are replaced by the kubelet well before they expire).

import { readFile } from 'node:fs/promises';
import type { TokenSource } from './connection.ts';

export function staticTokenSource(token: string): TokenSource {
  return { token: async () => token, invalidate: () => {} };
}

export interface FileTokenSourceOptions {
  /** Re-read the file at least this often (client-go re-reads service-account tokens every minute). */
  readonly maxAgeMs?: number;
  readonly now?: () => number;
  /** Sent while the file cannot be read (a kubeconfig's `token` beside its `tokenFile`, as client-go). */
  readonly fallback?: string;
}

/**
 * Reads the token from a file, caching it for at most maxAgeMs, and never past the token's own
 * expiry (the JWT `exp` claim) or past a 401 from the server.
 */
export class FileTokenSource implements TokenSource {
  readonly #path: string;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  readonly #fallback: string | undefined;
  #cached: string | undefined;
  #refreshAt = 0;

  constructor(path: string, options: FileTokenSourceOptions = {}) {
    this.#path = path;
    this.#maxAgeMs = options.maxAgeMs ?? 60_000;
    this.#now = options.now ?? Date.now;
    this.#fallback = options.fallback;
  }

  async token(): Promise<string | undefined> {
    const now = this.#now();
    if (this.#cached !== undefined && now < this.#refreshAt) return this.#cached;
    try {
      this.#cached = (await readFile(this.#path, 'utf8')).trim();
    } catch {
      // Keep using the last good token; a missing file mid-rotation is transient.
      return this.#cached ?? this.#fallback;
    }
    const expiry = jwtExpiryMs(this.#cached);
    this.#refreshAt = Math.min(now + this.#maxAgeMs, expiry === undefined ? Infinity : expiry - 10_000);
    return this.#cached;
  }

  invalidate(): void {
    this.#refreshAt = 0;
  }
}

/** The `exp` claim of a JWT in milliseconds, or undefined when the token is not a readable JWT. */
export function jwtExpiryMs(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof claims.exp === 'number' ? claims.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
