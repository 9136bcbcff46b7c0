// The "host:port" form of kube-proxy's bind address fields, read the same way where the config is
// checked (config-fields.ts) and where the daemon listens (daemon/http-listener.ts).

export const MAX_PORT = 65535;

/**
 * "0.0.0.0:10256", "[::1]:10249" or ":10256" split into host ("" for all addresses) and port;
 * undefined for any other shape. The caller decides what host and port range it accepts.
 */
export function splitHostPort(text: string): { readonly host: string; readonly port: number } | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d+)$/.exec(text);
  return match ? { host: match[1] ?? match[2] ?? '', port: Number(match[3]) } : undefined;
}
