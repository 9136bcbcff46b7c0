// Which proxy, if any, carries the connection to the API server, decided as client-go's transport
// does: the cluster's proxy-url wins; otherwise Go's http.ProxyFromEnvironment, i.e. HTTPS_PROXY
// (for an https server) or HTTP_PROXY, upper case before lower case, skipped for localhost, loopback
// addresses and hosts NO_PROXY matches.

import { BlockList, isIP } from 'node:net';

/** The proxy URL to use for `server`, or undefined for a direct connection. */
export function proxyFor(
  server: URL,
  proxyUrl: string | undefined,
  env: NodeJS.ProcessEnv,
): string | undefined {
  if (proxyUrl) return proxyUrl;
  const https = server.protocol === 'https:';
  const proxy = https ? envAny(env, 'HTTPS_PROXY', 'https_proxy') : envAny(env, 'HTTP_PROXY', 'http_proxy');
  if (proxy === undefined) return undefined;
  const host = server.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = server.port || (https ? '443' : '80');
  if (host === 'localhost' || isLoopback(host)) return undefined;
  if (noProxyMatches(envAny(env, 'NO_PROXY', 'no_proxy') ?? '', host, port)) return undefined;
  // Go reads a bare host:port as an http:// proxy.
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(proxy) ? proxy : `http://${proxy}`;
}

function envAny(env: NodeJS.ProcessEnv, ...names: string[]): string | undefined {
  for (const name of names) {
    const value = env[name];
    if (value) return value;
  }
  return undefined;
}

function isLoopback(host: string): boolean {
  const family = isIP(host);
  if (family === 4) return host.startsWith('127.');
  return family === 6 && host === '::1';
}

/**
 * NO_PROXY as Go's httpproxy reads it: comma-separated; `*` matches all; an IP or CIDR matches
 * addresses; `example.com` matches it and its subdomains, `.example.com` (or `*.example.com`) only
 * subdomains; an entry with `:port` matches that port only.
 */
export function noProxyMatches(noProxy: string, host: string, port: string): boolean {
  for (const raw of noProxy.split(',')) {
    let entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') return true;
    if (entry.includes('/')) {
      if (cidrContains(entry, host)) return true;
      continue;
    }
    let entryPort: string | undefined;
    const bracketed = /^\[(.*)\](?::(\d+))?$/.exec(entry);
    if (bracketed) {
      entry = bracketed[1] ?? '';
      entryPort = bracketed[2];
    } else if (isIP(entry) !== 6) {
      const colon = entry.lastIndexOf(':');
      if (colon !== -1) {
        entryPort = entry.slice(colon + 1);
        entry = entry.slice(0, colon);
      }
    }
    if (entryPort !== undefined && entryPort !== port) continue;
    if (isIP(entry) !== 0) {
      if (entry === host) return true;
      continue;
    }
    const subdomainsOnly = entry.startsWith('.') || entry.startsWith('*.');
    const domain = entry.replace(/^\*?\./, '');
    if (host.endsWith(`.${domain}`) || (!subdomainsOnly && host === domain)) return true;
  }
  return false;
}

function cidrContains(cidr: string, host: string): boolean {
  const [net, bits] = cidr.split('/');
  const family = isIP(net ?? '');
  const prefix = Number(bits);
  if (family === 0 || !Number.isInteger(prefix) || isIP(host) !== family) return false;
  const list = new BlockList();
  try {
    list.addSubnet(net as string, prefix, family === 4 ? 'ipv4' : 'ipv6');
  } catch {
    return false;
  }
  return list.check(host, family === 4 ? 'ipv4' : 'ipv6');
}
