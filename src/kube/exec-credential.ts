// Credential plugins (`users[].user.exec`), as client-go runs them: the command with its args and
// env, KUBERNETES_EXEC_INFO holding an ExecCredential request (never interactive: kproxy has no
// terminal; the cluster's details when provideClusterInfo), and the ExecCredential it prints read
// for a bearer token or a client certificate and key. The result is cached until shortly before its
// expirationTimestamp, or until the server answers 401 to it.

import { spawn } from 'node:child_process';
import type { CertSource, TokenSource } from './connection.ts';

export const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];

export type InteractiveMode = 'Never' | 'IfAvailable' | 'Always';

export interface ExecConfig {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: readonly { readonly name: string; readonly value: string }[];
  readonly apiVersion: string;
  readonly interactiveMode: InteractiveMode;
  readonly provideClusterInfo: boolean;
  readonly installHint?: string;
}

/** spec.cluster of the request: the kubeconfig cluster's fields, as client-go's Cluster type names them. */
export interface ExecClusterInfo {
  readonly server: string;
  readonly 'tls-server-name'?: string;
  readonly 'insecure-skip-tls-verify'?: boolean;
  readonly 'certificate-authority-data'?: string;
  readonly 'proxy-url'?: string;
  readonly config?: unknown;
}

/** What one run of the plugin gave; `expiresAt` in ms, absent when the credential does not expire. */
export interface ExecCredentials {
  readonly token?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly expiresAt?: number;
}

/** Parses `user.exec` with client-go's validation messages; `where` names the user for them. */
export function parseExecConfig(
  value: unknown,
  where: string,
): { ok: true; config: ExecConfig } | { ok: false; field?: string; reason: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { ok: false, reason: 'must be a map' };
  const exec = value as Record<string, unknown>;
  const { command, apiVersion } = exec;
  if (typeof command !== 'string' || command === '')
    return {
      ok: false,
      field: 'command',
      reason: `command must be specified for ${where} to use exec authentication plugin`,
    };
  if (typeof apiVersion !== 'string' || apiVersion === '')
    return {
      ok: false,
      field: 'apiVersion',
      reason: `apiVersion must be specified for ${where} to use exec authentication plugin`,
    };
  if (!EXEC_API_VERSIONS.includes(apiVersion))
    return { ok: false, field: 'apiVersion', reason: `exec plugin: invalid apiVersion "${apiVersion}"` };
  const args = exec.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string'))
    return { ok: false, field: 'args', reason: 'must be a list of strings' };
  const envList = exec.env ?? [];
  if (!Array.isArray(envList)) return { ok: false, field: 'env', reason: 'must be a list' };
  const env: { name: string; value: string }[] = [];
  for (const [i, entry] of envList.entries()) {
    const { name, value: v } = (entry ?? {}) as Record<string, unknown>;
    if (typeof name !== 'string' || name === '' || typeof v !== 'string')
      return { ok: false, field: `env[${i}]`, reason: 'needs a name and a string value' };
    env.push({ name, value: v });
  }
  // v1 must say; v1beta1 defaulted to IfAvailable (client-go's conversion).
  const mode = exec.interactiveMode ?? (apiVersion.endsWith('/v1beta1') ? 'IfAvailable' : undefined);
  if (mode === undefined)
    return {
      ok: false,
      field: 'interactiveMode',
      reason: `interactiveMode must be specified for ${where} to use exec authentication plugin`,
    };
  if (mode !== 'Never' && mode !== 'IfAvailable' && mode !== 'Always')
    return {
      ok: false,
      field: 'interactiveMode',
      reason: `invalid interactiveMode for ${where}: "${String(mode)}"`,
    };
  // kproxy never hands the plugin a terminal, so an Always plugin fails as client-go's would off one.
  if (mode === 'Always')
    return {
      ok: false,
      field: 'interactiveMode',
      reason: 'exec plugin cannot support interactive mode: standard input is not a terminal',
    };
  const hint = exec.installHint;
  return {
    ok: true,
    config: {
      command,
      args: args as string[],
      env,
      apiVersion,
      interactiveMode: mode,
      provideClusterInfo: exec.provideClusterInfo === true,
      ...(typeof hint === 'string' && hint !== '' ? { installHint: hint } : {}),
    },
  };
}

export interface ExecPluginOptions {
  /** The environment the plugin inherits (the daemon's own), before the config's env entries. */
  readonly env: NodeJS.ProcessEnv;
  readonly cluster?: ExecClusterInfo;
  /** Kill the plugin after this long; default 60 s (a cloud CLI fetching a token may take seconds). */
  readonly timeoutMs?: number;
  /** Run the plugin again this long before the credential's expiry; default 10 s. */
  readonly refreshBeforeMs?: number;
  readonly now?: () => number;
}

/** Output beyond this is not a credential: stop reading rather than buffer without bound. */
const MAX_OUTPUT_BYTES = 1 << 20;
/** A plugin's stderr kept for its error: enough for gke-gcloud-auth-plugin's multi-line causes, bounded against a chatty one. */
export const MAX_STDERR_BYTES = 4096;

/** Runs a credential plugin and caches what it gave; one run at a time, shared by all callers. */
export class ExecCredentialPlugin {
  readonly #config: ExecConfig;
  readonly #options: ExecPluginOptions;
  readonly #now: () => number;
  #cached: ExecCredentials | undefined;
  #running: Promise<ExecCredentials> | undefined;

  constructor(config: ExecConfig, options: ExecPluginOptions) {
    this.#config = config;
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The cached credentials, or fresh ones from a run of the plugin; rejects with client-go's wording. */
  async credentials(): Promise<ExecCredentials> {
    const cached = this.#cached;
    const margin = this.#options.refreshBeforeMs ?? 10_000;
    if (cached && (cached.expiresAt === undefined || this.#now() < cached.expiresAt - margin)) return cached;
    this.#running ??= this.#run().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  /**
   * The server refused `used` (401): drop it so the next call runs the plugin. Credentials that were
   * replaced meanwhile are kept (another request already refreshed them), as client-go does.
   */
  invalidate(used?: ExecCredentials): void {
    if (used === undefined || used === this.#cached) this.#cached = undefined;
  }

  /** The plugin as the bearer-token source of a connection. */
  tokenSource(): TokenSource {
    let last: ExecCredentials | undefined;
    return {
      token: async () => {
        last = await this.credentials();
        return last.token;
      },
      invalidate: () => this.invalidate(last),
    };
  }

  /** The plugin as the client-certificate source of a connection (for plugins that return one). */
  certSource(): CertSource {
    return {
      certificate: async () => {
        const { cert, key } = await this.credentials();
        return cert !== undefined && key !== undefined ? { cert, key } : undefined;
      },
    };
  }

  async #run(): Promise<ExecCredentials> {
    const { command, args, apiVersion } = this.#config;
    const request = {
      apiVersion,
      kind: 'ExecCredential',
      spec: {
        interactive: false,
        ...(this.#config.provideClusterInfo && this.#options.cluster
          ? { cluster: this.#options.cluster }
          : {}),
      },
    };
    const env: NodeJS.ProcessEnv = { ...this.#options.env };
    for (const { name, value } of this.#config.env) env[name] = value;
    env.KUBERNETES_EXEC_INFO = JSON.stringify(request);
    const output = await runPlugin(command, args, env, this.#options.timeoutMs ?? 60_000);
    if (!output.ok) throw new Error(this.#describeFailure(output.failure));
    const credentials = parseExecCredential(output.stdout, apiVersion);
    if (typeof credentials === 'string') throw new Error(`getting credentials: ${credentials}`);
    this.#cached = credentials;
    return credentials;
  }

  #describeFailure(failure: RunFailure): string {
    const { command, installHint } = this.#config;
    switch (failure.kind) {
      case 'not-found':
        return `getting credentials: exec: executable ${command} not found${installHint ? `\n\n${installHint}` : ''}`;
      case 'exit':
        return `getting credentials: exec: executable ${command} failed with exit code ${failure.code}${failure.stderr ? `: ${failure.stderr}` : ''}`;
      case 'timeout':
        return `getting credentials: exec: executable ${command} did not finish within ${failure.ms} ms (killed)`;
      case 'other':
        return `getting credentials: exec: executable ${command}: ${failure.message}`;
    }
  }
}

/** The ExecCredential a plugin printed, or what is wrong with it (client-go's messages). */
export function parseExecCredential(stdout: string, apiVersion: string): ExecCredentials | string {
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch (err) {
    const shown = stdout.trim().slice(0, 80);
    return `decoding stdout: ${(err as Error).message}${shown ? ` (output began: ${JSON.stringify(shown)})` : ' (no output)'}`;
  }
  const cred = (typeof doc === 'object' && doc !== null ? doc : {}) as Record<string, unknown>;
  if (cred.kind !== 'ExecCredential' || typeof cred.apiVersion !== 'string')
    return "decoding stdout: couldn't get version/kind; not an ExecCredential";
  if (cred.apiVersion !== apiVersion)
    return `exec plugin is configured to use API version ${apiVersion}, plugin returned version ${cred.apiVersion}`;
  const status = cred.status as Record<string, unknown> | undefined | null;
  if (typeof status !== 'object' || status === null) return "exec plugin didn't return a status field";
  const text = (field: string): string =>
    typeof status[field] === 'string' ? (status[field] as string) : '';
  const token = text('token');
  const cert = text('clientCertificateData');
  const key = text('clientKeyData');
  if (token === '' && cert === '' && key === '') return "exec plugin didn't return a token or cert/key pair";
  if ((cert === '') !== (key === '')) return 'exec plugin returned only certificate or key, not both';
  let expiresAt: number | undefined;
  if (status.expirationTimestamp !== undefined && status.expirationTimestamp !== null) {
    expiresAt =
      typeof status.expirationTimestamp === 'string' ? Date.parse(status.expirationTimestamp) : Number.NaN;
    if (Number.isNaN(expiresAt))
      return `decoding stdout: status.expirationTimestamp ${JSON.stringify(status.expirationTimestamp)} is not an RFC 3339 time`;
  }
  return {
    ...(token ? { token } : {}),
    ...(cert ? { cert, key } : {}),
    ...(expiresAt === undefined ? {} : { expiresAt }),
  };
}

type RunFailure =
  | { readonly kind: 'not-found' }
  | { readonly kind: 'exit'; readonly code: number | string; readonly stderr: string }
  | { readonly kind: 'timeout'; readonly ms: number }
  | { readonly kind: 'other'; readonly message: string };

/** Runs the plugin without a stdin; its stderr is kept for the error (plugins explain failures there). */
function runPlugin(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ ok: true; stdout: string } | { ok: false; failure: RunFailure }> {
  return new Promise((resolvePromise) => {
    // Its own process group, so a timeout kills whatever it started too (a child left holding the
    // output pipe would otherwise keep us waiting).
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let stderrSize = 0;
    let size = 0;
    const timer = setTimeout(() => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
      resolvePromise({ ok: false, failure: { kind: 'timeout', ms: timeoutMs } });
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_OUTPUT_BYTES) stdout.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderrSize < MAX_STDERR_BYTES) stderr.push(chunk.subarray(0, MAX_STDERR_BYTES - stderrSize));
      stderrSize += chunk.length;
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolvePromise({
        ok: false,
        failure: err.code === 'ENOENT' ? { kind: 'not-found' } : { kind: 'other', message: err.message },
      });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) {
        return resolvePromise({
          ok: false,
          failure: { kind: 'exit', code: code ?? String(signal), stderr: keptStderr(stderr, stderrSize) },
        });
      }
      resolvePromise({ ok: true, stdout: Buffer.concat(stdout).toString('utf8') });
    });
  });
}

/** The whole stderr as the plugin wrote it, or its first MAX_STDERR_BYTES saying how much was cut. */
function keptStderr(chunks: readonly Buffer[], size: number): string {
  const text = Buffer.concat(chunks).toString('utf8').trim();
  return size <= MAX_STDERR_BYTES
    ? text
    : `${text}\n[stderr cut: first ${MAX_STDERR_BYTES} of ${size} bytes]`;
}
