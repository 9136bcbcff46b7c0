// How to reach and authenticate to an API server, whichever way it was configured (kubeconfig,
// in-cluster service account, --master). The client takes exactly this.

export interface TokenSource {
  /** The bearer token to send now (may re-read a file that is rotated underneath us). */
  token(): Promise<string | undefined>;
  /** Called after the server answered 401: the next token() must not reuse a cached value. */
  invalidate(): void;
}

export interface ClusterConnection {
  /** Base URL, e.g. https://10.96.0.1:443 (may carry a path prefix behind a proxy). */
  readonly server: string;
  /** PEM bundle of the CAs to trust; the system roots when absent. */
  readonly ca?: string;
  /** PEM client certificate and key for client-certificate authentication. */
  readonly cert?: string;
  readonly key?: string;
  readonly insecureSkipTlsVerify?: boolean;
  /** TLS server name to verify instead of the URL's host. */
  readonly tlsServerName?: string;
  readonly tokenSource?: TokenSource;
  /** A client certificate that may change (a credential plugin's): asked before each request. */
  readonly certSource?: CertSource;
  /** The cluster's proxy-url: wins over HTTPS_PROXY / HTTP_PROXY, as in client-go. */
  readonly proxyUrl?: string;
}

export interface CertSource {
  /** The PEM certificate and key to present now; a change opens new connections with it. */
  certificate(): Promise<{ readonly cert: string; readonly key: string } | undefined>;
}

/** A user error in the connection configuration, with what a person needs to fix it. */
export interface ConfigError {
  readonly file?: string;
  readonly field?: string;
  readonly reason: string;
}

export type ConnectionResult =
  | {
      readonly ok: true;
      readonly connection: ClusterConnection;
      /** Things that work but should not be so (insecure-skip-tls-verify), for the log. */
      readonly warnings?: readonly string[];
    }
  | { readonly ok: false; readonly error: ConfigError };

export function formatConfigError(error: ConfigError): string {
  const where = [error.file, error.field].filter((p) => p !== undefined).join(': ');
  return where === '' ? error.reason : `${where}: ${error.reason}`;
}

/** `--master` overrides the server address of whatever configuration was loaded (as in kube-proxy). */
export function withMaster(connection: ClusterConnection, master: string | undefined): ClusterConnection {
  return master ? { ...connection, server: master } : connection;
}
