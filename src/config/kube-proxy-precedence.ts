// A kube-proxy command line as kube-proxy reads it (options.go's Complete, 1.37): with --config,
// the file is the whole configuration and the flags bound to its fields are ignored, except the
// logging flags (-v ...), --hostname-override and --master; without it, the deprecated
// --healthz-port/--metrics-port still apply (0 turns the server off). Flags that have no effect
// here (their field's FieldSpec is inert, or klog's removed flags) are dropped too. Each dropped flag
// gives one warning that says why.
import { canonicalIP, familyOf } from '../../contract/base/ip-address.ts';
import { type ConfigEnvironment, loadProxyConfig, type ProxyConfig } from './config.ts';
import { CONFIG_FIELDS, inertValueMatters } from './config-fields.ts';
import { type FlagValues, PROXY_FLAGS } from './proxy-flags.ts';

export type KubeProxyFlagsResult =
  | { readonly ok: true; readonly values: FlagValues; readonly warnings: readonly string[] }
  | { readonly ok: false; readonly error: string };

const DEPRECATED_PORTS = [
  { port: 'healthz-port', address: 'healthz-bind-address' },
  { port: 'metrics-port', address: 'metrics-bind-address' },
] as const;

export function kubeProxyFlags(values: FlagValues): KubeProxyFlagsResult {
  const withFile = typeof values.config === 'string';
  const kept: Record<string, FlagValues[string]> = {};
  const warnings: string[] = [];
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined) continue;
    const flag = PROXY_FLAGS[name];
    const inert = CONFIG_FIELDS.get(flag?.paths?.[0] ?? '');
    if (flag?.ignored !== undefined) {
      warnings.push(`--${name} has no effect: ${flag.ignored}`);
    } else if (inert?.type === 'inert') {
      // A value that asks for nothing (--profiling=false), or for what kproxy does anyway
      // (--bind-address-hard-fail=true), needs no warning.
      if (inertValueMatters(inert, value)) warnings.push(`--${name} has no effect: ${inert.why}`);
    } else if (withFile && flag?.paths !== undefined && !flag.keptWithConfig) {
      warnings.push(`--${name} is ignored: --config is given, and kube-proxy then reads the file instead`);
    } else {
      kept[name] = value;
    }
  }
  // processHostnameOverrideFlag: an empty flag is unset, one of only spaces an error.
  const hostname = values['hostname-override'];
  if (typeof hostname === 'string' && hostname !== '' && hostname.trim() === '') {
    return { ok: false, error: 'empty hostname-override is invalid' };
  }
  for (const { port, address } of DEPRECATED_PORTS) {
    const raw = values[port];
    if (typeof raw !== 'string') continue;
    delete kept[port];
    warnings.push(`--${port} is deprecated: use --${address}`);
    const number = /^[+-]?\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isInteger(number) || number < -(2 ** 31) || number >= 2 ** 31) {
      return { ok: false, error: `--${port}: ${JSON.stringify(raw)} is not an int32` };
    }
    // kube-proxy applies them only without --config and --write-config-to.
    if (withFile || typeof values['write-config-to'] === 'string') continue;
    const given = kept[address];
    if (number === 0) kept[address] = '';
    else if (typeof given === 'string') kept[address] = withPortIfBare(given, number);
  }
  return { ok: true, values: kept, warnings };
}

/** kube-proxy's AppendPortIfNeeded: only a bare IP gets the port. */
function withPortIfBare(address: string, port: number): string {
  const ip = canonicalIP(address);
  if (ip === undefined) return address;
  return familyOf(ip) === 'IPv6' ? `[${address}]:${port}` : `${address}:${port}`;
}

export type CommandLineConfigResult =
  | {
      readonly ok: true;
      readonly config: ProxyConfig;
      /** The flags kube-proxy's precedence kept (run reads --write-config-to, --cleanup, ... there). */
      readonly flags: FlagValues;
      /** What `kproxy run` logs at start, in its order: the flags' warnings, then the file's. */
      readonly warnings: readonly string[];
    }
  | { readonly ok: false; readonly error: string; readonly usage: boolean };

/**
 * A command line's configuration as `kproxy run` reads it, for run and for the commands that show
 * what run would apply (render, trace, diff), so their warnings are run's, word for word.
 * `render`: render's own choices, none of them kube-proxy flags: a config file read when --config
 * is not given (--example's), with every flag over it; and the mode to render, over the file's.
 */
export async function loadCommandLineConfig(
  values: FlagValues,
  env: ConfigEnvironment,
  render: { readonly defaultConfig?: string | undefined; readonly mode?: string | undefined } = {},
): Promise<CommandLineConfigResult> {
  const read = kubeProxyFlags(values);
  if (!read.ok) return { ...read, usage: true };
  const flags = {
    ...read.values,
    ...(read.values.config === undefined && render.defaultConfig !== undefined
      ? { config: render.defaultConfig }
      : {}),
    ...(render.mode !== undefined ? { 'proxy-mode': render.mode } : {}),
  };
  const loaded = await loadProxyConfig(flags, env);
  if (!loaded.ok) return loaded;
  return {
    ok: true,
    config: loaded.config,
    flags: read.values,
    warnings: [...read.warnings, ...loaded.warnings],
  };
}
