// Where --input paths point: a file, `-` for stdin, or a directory whose .yaml/.yml/.json files,
// in it and in its subdirectories, are read in path order (so the result does not depend on the
// file system's listing order): `kubectl cluster-info dump --output-directory` writes nodes.json
// and a directory per namespace (services.json, pods.json, a logs.txt per pod).
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

export const STDIN_PATH = '-';
const INPUT_EXTENSIONS = /\.(ya?ml|json)$/;

export interface InputText {
  /** The name used in messages: the path as given, or "<stdin>". */
  readonly file: string;
  readonly text: string;
}

export type ReadInputsResult =
  | { readonly ok: true; readonly inputs: readonly InputText[] }
  | { readonly ok: false; readonly error: string };

/** Reads every input in order. `readStdin` is called at most once, even if `-` is given twice. */
export async function readInputs(
  paths: readonly string[],
  readStdin: () => Promise<string>,
): Promise<ReadInputsResult> {
  const inputs: InputText[] = [];
  let stdinRead = false;
  for (const path of paths) {
    if (path === STDIN_PATH) {
      if (!stdinRead) inputs.push({ file: '<stdin>', text: await readStdin() });
      stdinRead = true;
      continue;
    }
    const files = await filesAt(path);
    if (!files.ok) return files;
    for (const file of files.files) {
      const text = await readText(file);
      if (!text.ok) return text;
      inputs.push({ file, text: text.text });
    }
  }
  return { ok: true, inputs };
}

async function filesAt(
  path: string,
): Promise<
  { readonly ok: true; readonly files: readonly string[] } | { readonly ok: false; readonly error: string }
> {
  try {
    if (!(await stat(path)).isDirectory()) return { ok: true, files: [path] };
    const files = (await readdir(path, { recursive: true }))
      .filter((name) => INPUT_EXTENSIONS.test(name))
      .sort()
      .map((name) => join(path, name));
    const regular = [];
    for (const file of files) if ((await stat(file)).isFile()) regular.push(file);
    if (regular.length === 0)
      return { ok: false, error: `${path}: directory has no .yaml, .yml or .json file` };
    return { ok: true, files: regular };
  } catch (error) {
    return { ok: false, error: `${path}: ${fileErrorReason(error)}` };
  }
}

async function readText(
  file: string,
): Promise<{ readonly ok: true; readonly text: string } | { readonly ok: false; readonly error: string }> {
  try {
    return { ok: true, text: await readFile(file, 'utf8') };
  } catch (error) {
    return { ok: false, error: `${file}: ${fileErrorReason(error)}` };
  }
}

/** A reason for a person from a file system error; anything that is not one is a bug and rethrown. */
export function fileErrorReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === undefined) throw error;
  const reasons: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EISDIR: 'is a directory',
    ENOTDIR: 'not a directory',
  };
  return reasons[code] ?? `cannot read (${code})`;
}
