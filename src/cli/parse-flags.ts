// Command-line flags read as kube-proxy's flag library (spf13/pflag, as cobra uses it) reads them,
// for every kproxy command, so a kube-proxy command line means the same here: `--flag=value`,
// `--flag value`, `-v=2`, `-v 2`, `-v2`, bool flags bare or `--x=true|True|TRUE|1|t|T|false|...`,
// `--flag=` (an empty value, not a missing one), repeated flags (the last wins; list flags append),
// `_` read as `-` in names (component-base's normalization), `--` ends the flags, and pflag's messages for what it refuses. No npm package keeps pflag's
// semantics (they add `--no-x`, or take `--x value` for bools), hence this small parser.
import type { ParseArgsOptionsConfig } from 'node:util';
import type { FlagValues } from '../config/proxy-flags.ts';

export type ParseFlagsResult =
  | { readonly ok: true; readonly values: FlagValues; readonly positionals: readonly string[] }
  | { readonly ok: false; readonly error: string };

type Option = ParseArgsOptionsConfig[string];

/** Go's strconv.ParseBool, which pflag's bool flags use. */
const GO_BOOLS: ReadonlyMap<string, boolean> = new Map([
  ...['1', 't', 'T', 'TRUE', 'true', 'True'].map((text) => [text, true] as const),
  ...['0', 'f', 'F', 'FALSE', 'false', 'False'].map((text) => [text, false] as const),
]);

export function parseFlags(
  args: readonly string[],
  options: ParseArgsOptionsConfig,
  allowPositionals = false,
): ParseFlagsResult {
  const values: Record<string, string | boolean | string[]> = {};
  const positionals: string[] = [];
  const byShort = new Map(
    Object.entries(options).flatMap(([name, option]) =>
      option.short ? [[option.short, name] as const] : [],
    ),
  );
  const set = (name: string, shown: string, text: string): string | undefined => {
    const option = options[name]!;
    if (option.type === 'boolean') {
      const value = GO_BOOLS.get(text);
      if (value === undefined) {
        return `invalid argument ${quote(text)} for ${quote(shown)} flag: strconv.ParseBool: parsing ${quote(text)}: invalid syntax`;
      }
      values[name] = value;
    } else if (option.multiple) {
      const list = values[name];
      values[name] = Array.isArray(list) ? [...list, text] : [text];
    } else {
      values[name] = text;
    }
    return undefined;
  };

  const rest = [...args];
  while (rest.length > 0) {
    const arg = rest.shift()!;
    if (arg === '--') {
      positionals.push(...rest);
      break;
    }
    if (arg.length < 2 || !arg.startsWith('-')) {
      positionals.push(arg);
      continue;
    }
    const error = arg.startsWith('--') ? longFlag(arg, rest) : shortFlags(arg, rest);
    if (error !== undefined) return { ok: false, error };
  }
  if (!allowPositionals && positionals.length > 0) {
    return { ok: false, error: `takes no arguments, got ${positionals.map(quote).join(' ')}` };
  }
  return { ok: true, values, positionals };

  function longFlag(arg: string, rest: string[]): string | undefined {
    const body = arg.slice(2);
    if (body === '' || body.startsWith('-') || body.startsWith('=')) return `bad flag syntax: ${arg}`;
    const equals = body.indexOf('=');
    // component-base's WordSepNormalizeFunc: --iptables_sync_period is --iptables-sync-period.
    const name = (equals < 0 ? body : body.slice(0, equals)).replaceAll('_', '-');
    const option: Option | undefined = Object.hasOwn(options, name) ? options[name] : undefined;
    if (option === undefined) return `unknown flag: --${name}`;
    if (equals >= 0) return set(name, `--${name}`, body.slice(equals + 1));
    if (option.type === 'boolean') return set(name, `--${name}`, 'true');
    // pflag takes the next argument as the value even when it starts with a dash.
    if (rest.length === 0) return `flag needs an argument: --${name}`;
    return set(name, `--${name}`, rest.shift()!);
  }

  function shortFlags(arg: string, rest: string[]): string | undefined {
    let shorthands = arg.slice(1);
    while (shorthands.length > 0) {
      const letter = shorthands[0]!;
      const name = byShort.get(letter);
      if (name === undefined) return `unknown shorthand flag: ${quoteLetter(letter)} in ${arg}`;
      const shown = `-${letter}, --${name}`;
      if (shorthands.length > 2 && shorthands[1] === '=') return set(name, shown, shorthands.slice(2));
      if (options[name]!.type === 'boolean') {
        const error = set(name, shown, 'true');
        if (error !== undefined) return error;
        shorthands = shorthands.slice(1);
        continue;
      }
      if (shorthands.length > 1) return set(name, shown, shorthands.slice(1));
      if (rest.length === 0) return `flag needs an argument: ${quoteLetter(letter)} in ${arg}`;
      return set(name, shown, rest.shift()!);
    }
    return undefined;
  }
}

/** Go's %q of a string, for the texts pflag prints. */
function quote(text: string): string {
  return JSON.stringify(text);
}

function quoteLetter(letter: string): string {
  return `'${letter}'`;
}
