// node:util parseArgs, strict, with the two habits kube-proxy's flag library (pflag) allows that
// parseArgs does not: `--flag=true|false` for boolean flags. Problems become messages, not throws.
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import type { FlagValues } from '../config/proxy-flags.ts';

export type ParseFlagsResult =
  | { readonly ok: true; readonly values: FlagValues; readonly positionals: readonly string[] }
  | { readonly ok: false; readonly error: string };

export function parseFlags(
  args: readonly string[],
  options: ParseArgsOptionsConfig,
  allowPositionals = false,
): ParseFlagsResult {
  const normalized = args.map((arg) => {
    const match = /^--([^=]+)=(true|false)$/.exec(arg);
    if (match === null || options[match[1]!]?.type !== 'boolean') return arg;
    return match[2] === 'true' ? `--${match[1]}` : `--no-${match[1]}`;
  });
  try {
    const { values, positionals } = parseArgs({
      args: normalized,
      options,
      strict: true,
      allowPositionals,
      allowNegative: true,
    });
    return { ok: true, values: values as FlagValues, positionals };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) throw error;
    // parseArgs appends advice about `--` that does not help here; keep the first sentence.
    return { ok: false, error: (error as Error).message.split('. ')[0]!.replace(/\.$/, '') };
  }
}
