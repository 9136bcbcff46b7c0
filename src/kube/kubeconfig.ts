// kubeconfig files as kubectl reads them: clusters, users and contexts by name, current-context,
// certificate and key files or inline data, bearer token or tokenFile (the file wins, the token
// standing in while it cannot be read), exec credential plugins, proxy-url, insecure-skip-tls-verify
// (warned about; refused beside a CA, as client-go does).
// Several files (KUBECONFIG=a:b) merge like kubectl: the first file to define a name or to set
// current-context wins. Relative file paths resolve against the file that mentions them.

import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path';
import { parse } from 'yaml';
import type { ClusterConnection, ConfigError, ConnectionResult } from './connection.ts';
import { type ExecClusterInfo, ExecCredentialPlugin, parseExecConfig } from './exec-credential.ts';
import { FileTokenSource, staticTokenSource } from './token-source.ts';

/** Which files to read: --kubeconfig alone, else every KUBECONFIG entry, else ~/.kube/config. */
export function kubeconfigPaths(
  flag: string | undefined,
  env: NodeJS.ProcessEnv,
  home: string = homedir(),
): string[] {
  if (flag) return [flag];
  const fromEnv = (env.KUBECONFIG ?? '').split(delimiter).filter((p) => p !== '');
  return fromEnv.length > 0 ? fromEnv : [join(home, '.kube', 'config')];
}

type Entry = Record<string, unknown>;

interface Named {
  readonly file: string;
  readonly field: string;
  readonly value: Entry;
}

interface Merged {
  readonly clusters: Map<string, Named>;
  readonly users: Map<string, Named>;
  readonly contexts: Map<string, Named>;
  currentContext?: { readonly file: string; readonly name: string };
}

export interface LoadKubeconfigOptions {
  /** --context: use this context instead of current-context. */
  readonly context?: string;
  /** Whether a missing file is an error (an explicit --kubeconfig) or skipped (KUBECONFIG entries). */
  readonly requireAll?: boolean;
  /** The environment a credential plugin inherits; default none. */
  readonly env?: NodeJS.ProcessEnv;
}

export async function loadKubeconfig(
  paths: readonly string[],
  options: LoadKubeconfigOptions = {},
): Promise<ConnectionResult> {
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map() };
  const read: string[] = [];
  for (const path of paths) {
    const file = resolve(path);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if (options.requireAll || paths.length === 1)
        return fail({ file, reason: `cannot read: ${(err as Error).message}` });
      continue;
    }
    let doc: unknown;
    try {
      doc = parse(text);
    } catch (err) {
      // The parser's message goes on to quote the offending line with a caret: keep only its first line.
      const [first] = (err as Error).message.split('\n');
      return fail({ file, reason: `not valid YAML: ${first?.replace(/:$/, '')}` });
    }
    const problem = mergeFile(merged, file, doc ?? {});
    if (problem) return fail(problem);
    read.push(file);
  }
  if (read.length === 0) return fail({ reason: `no kubeconfig file found (looked at ${paths.join(', ')})` });
  return resolveContext(merged, read, options.context, options.env ?? {});
}

function mergeFile(merged: Merged, file: string, doc: unknown): ConfigError | undefined {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    return { file, reason: 'not a kubeconfig (a YAML map)' };
  const config = doc as Entry;
  for (const [list, key, into] of [
    ['clusters', 'cluster', merged.clusters],
    ['users', 'user', merged.users],
    ['contexts', 'context', merged.contexts],
  ] as const) {
    const entries = config[list] ?? [];
    if (!Array.isArray(entries)) return { file, field: list, reason: 'must be a list' };
    for (const [i, entry] of entries.entries()) {
      const field = `${list}[${i}]`;
      const name = (entry as Entry | null)?.name;
      if (typeof name !== 'string' || name === '')
        return { file, field: `${field}.name`, reason: 'required' };
      const value = (entry as Entry)[key] ?? {};
      if (typeof value !== 'object' || value === null)
        return { file, field: `${field}.${key}`, reason: 'must be a map' };
      if (!into.has(name)) into.set(name, { file, field: `${field}.${key}`, value: value as Entry });
    }
  }
  const current = config['current-context'];
  if (merged.currentContext === undefined && typeof current === 'string' && current !== '') {
    merged.currentContext = { file, name: current };
  }
  return undefined;
}

async function resolveContext(
  merged: Merged,
  files: readonly string[],
  override: string | undefined,
  env: NodeJS.ProcessEnv,
): Promise<ConnectionResult> {
  const contextName = override ?? merged.currentContext?.name;
  // client-go then has no cluster and says "invalid configuration: cluster has no server defined".
  if (!contextName) {
    return fail({
      ...(files.length === 1 ? { file: files[0]! } : {}),
      reason:
        'current-context is not set, so there is no cluster to use (client-go: "cluster has no server defined"); set it with kubectl config use-context NAME',
    });
  }
  const context = merged.contexts.get(contextName);
  if (!context) {
    return fail({
      ...(merged.currentContext ? { file: merged.currentContext.file } : {}),
      reason: `context "${contextName}" not found`,
    });
  }
  const clusterName = context.value.cluster;
  if (typeof clusterName !== 'string' || clusterName === '') {
    return fail({ file: context.file, field: `${context.field}.cluster`, reason: 'required' });
  }
  const cluster = merged.clusters.get(clusterName);
  if (!cluster)
    return fail({
      file: context.file,
      field: `${context.field}.cluster`,
      reason: `cluster "${clusterName}" not found`,
    });
  const userName = context.value.user;
  const user = typeof userName === 'string' && userName !== '' ? merged.users.get(userName) : undefined;
  if (typeof userName === 'string' && userName !== '' && !user) {
    return fail({
      file: context.file,
      field: `${context.field}.user`,
      reason: `user "${userName}" not found`,
    });
  }

  const server = cluster.value.server;
  if (typeof server !== 'string' || server === '')
    return fail({ file: cluster.file, field: `${cluster.field}.server`, reason: 'required' });
  try {
    new URL(server);
  } catch {
    return fail({ file: cluster.file, field: `${cluster.field}.server`, reason: `"${server}" is not a URL` });
  }
  const ca = await fileOrData(cluster, 'certificate-authority', 'certificate-authority-data');
  if (!ca.ok) return fail(ca.error);
  const insecure = cluster.value['insecure-skip-tls-verify'] === true;
  const warnings: string[] = [];
  if (insecure) {
    if (ca.value !== undefined) {
      return fail({
        file: cluster.file,
        field: `${cluster.field}.insecure-skip-tls-verify`,
        reason: 'specifying a root certificates file with the insecure flag is not allowed',
      });
    }
    warnings.push(
      `${cluster.file}: ${cluster.field}.insecure-skip-tls-verify: the API server's certificate is not verified`,
    );
  }
  const proxyUrl = cluster.value['proxy-url'];
  if (proxyUrl !== undefined && proxyUrl !== '') {
    const problem = checkProxyUrl(proxyUrl);
    if (problem) return fail({ file: cluster.file, field: `${cluster.field}.proxy-url`, reason: problem });
  }
  const tlsServerName = cluster.value['tls-server-name'];
  let connection: ClusterConnection = {
    server,
    ...(ca.value ? { ca: ca.value } : {}),
    ...(insecure ? { insecureSkipTlsVerify: true } : {}),
    ...(typeof tlsServerName === 'string' && tlsServerName !== '' ? { tlsServerName } : {}),
    ...(typeof proxyUrl === 'string' && proxyUrl !== '' ? { proxyUrl } : {}),
  };
  if (user) {
    for (const unsupported of ['auth-provider', 'username']) {
      if (user.value[unsupported] !== undefined) {
        return fail({
          file: user.file,
          field: `${user.field}.${unsupported}`,
          reason: 'not supported by kproxy; use a client certificate, token, tokenFile or exec plugin',
        });
      }
    }
    const cert = await fileOrData(user, 'client-certificate', 'client-certificate-data');
    if (!cert.ok) return fail(cert.error);
    const key = await fileOrData(user, 'client-key', 'client-key-data');
    if (!key.ok) return fail(key.error);
    if ((cert.value === undefined) !== (key.value === undefined)) {
      return fail({
        file: user.file,
        field: user.field,
        reason: 'a client certificate needs a client key, and a key needs a certificate',
      });
    }
    const token = typeof user.value.token === 'string' ? user.value.token : '';
    const tokenFile = typeof user.value.tokenFile === 'string' ? user.value.tokenFile : '';
    connection = {
      ...connection,
      ...(cert.value ? { cert: cert.value, key: key.value } : {}),
      ...(tokenFile !== ''
        ? {
            tokenSource: new FileTokenSource(relativeTo(user.file, tokenFile), {
              ...(token !== '' ? { fallback: token } : {}),
            }),
          }
        : token !== ''
          ? { tokenSource: staticTokenSource(token) }
          : {}),
    };
    if (user.value.exec !== undefined && user.value.exec !== null) {
      const where = `${user.field}.exec`;
      const parsed = parseExecConfig(user.value.exec, where);
      if (!parsed.ok) {
        return fail({
          file: user.file,
          field: parsed.field ? `${where}.${parsed.field}` : where,
          reason: parsed.reason,
        });
      }
      // A token in the kubeconfig is used instead of the plugin, as client-go does.
      if (token === '' && tokenFile === '') {
        const plugin = new ExecCredentialPlugin(parsed.config, {
          env,
          cluster: execClusterInfo(connection, cluster.value),
        });
        connection = {
          ...connection,
          tokenSource: plugin.tokenSource(),
          ...(cert.value ? {} : { certSource: plugin.certSource() }),
        };
      }
    }
  }
  return { ok: true, connection, ...(warnings.length > 0 ? { warnings } : {}) };
}

/** spec.cluster for a plugin with provideClusterInfo, as client-go fills it from the loaded config. */
function execClusterInfo(connection: ClusterConnection, cluster: Entry): ExecClusterInfo {
  const extensions = Array.isArray(cluster.extensions) ? (cluster.extensions as unknown[]) : [];
  const execExtension = extensions.find(
    (e) => (e as Entry | null)?.name === 'client.authentication.k8s.io/exec',
  ) as Entry | undefined;
  return {
    server: connection.server,
    ...(connection.tlsServerName ? { 'tls-server-name': connection.tlsServerName } : {}),
    ...(connection.insecureSkipTlsVerify ? { 'insecure-skip-tls-verify': true } : {}),
    ...(connection.ca ? { 'certificate-authority-data': Buffer.from(connection.ca).toString('base64') } : {}),
    ...(connection.proxyUrl ? { 'proxy-url': connection.proxyUrl } : {}),
    ...(execExtension?.extension !== undefined ? { config: execExtension.extension } : {}),
  };
}

/** client-go's check of proxy-url: a URL with an http, https or socks5 scheme. */
function checkProxyUrl(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a URL';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `"${value}" is not a URL`;
  }
  return ['http:', 'https:', 'socks5:'].includes(url.protocol)
    ? undefined
    : `scheme "${url.protocol.replace(/:$/, '')}" is not supported (http, https or socks5)`;
}

/** A PEM from `<fileField>` (a path) or `<dataField>` (base64); data wins, as in client-go. */
async function fileOrData(
  entry: Named,
  fileField: string,
  dataField: string,
): Promise<{ ok: true; value: string | undefined } | { ok: false; error: ConfigError }> {
  const data = entry.value[dataField];
  if (typeof data === 'string' && data !== '') {
    const pem = Buffer.from(data, 'base64').toString('utf8');
    if (!pem.includes('-----BEGIN')) {
      return {
        ok: false,
        error: {
          file: entry.file,
          field: `${entry.field}.${dataField}`,
          reason: 'is not base64-encoded PEM',
        },
      };
    }
    return { ok: true, value: pem };
  }
  const path = entry.value[fileField];
  if (typeof path !== 'string' || path === '') return { ok: true, value: undefined };
  const full = relativeTo(entry.file, path);
  try {
    return { ok: true, value: await readFile(full, 'utf8') };
  } catch (err) {
    return {
      ok: false,
      error: {
        file: entry.file,
        field: `${entry.field}.${fileField}`,
        reason: `cannot read ${full}: ${(err as Error).message}`,
      },
    };
  }
}

function relativeTo(configFile: string, path: string): string {
  return isAbsolute(path) ? path : resolve(dirname(configFile), path);
}

function fail(error: ConfigError): ConnectionResult {
  return { ok: false, error };
}
