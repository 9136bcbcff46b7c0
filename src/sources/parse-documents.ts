// Text of one input file → the plain documents in it. Accepts JSON (what `kubectl -o json`
// prints; several values one after another, as `kubectl cluster-info dump` prints them) and YAML
// with any number of `---` separated documents. A file that does not parse is a user error naming
// the file and line.
import { LineCounter, parseAllDocuments } from 'yaml';
import { parseJsonStream } from './json-stream.ts';

export type ParseDocumentsResult =
  | { readonly ok: true; readonly documents: readonly unknown[] }
  | { readonly ok: false; readonly error: string };

/**
 * The YAML parser holds ~140 bytes of syntax tree per byte of text: a 50 MB file ran Node out of
 * memory. JSON, parsed by JSON.parse, has no such limit.
 */
export const MAX_YAML_BYTES = 16 * 1024 * 1024;

export function parseDocuments(text: string, file: string): ParseDocumentsResult {
  const json = parseJsonFast(text);
  if (json !== undefined) return { ok: true, documents: json };
  if (text.length > MAX_YAML_BYTES) {
    const size = (text.length / 1024 / 1024).toFixed(0);
    return {
      ok: false,
      error: `${file}: ${size} MiB of YAML is over the ${MAX_YAML_BYTES / 1024 / 1024} MiB this parser can hold in memory; give JSON instead (kubectl get ... -o json)`,
    };
  }
  const lineCounter = new LineCounter();
  const parsed = parseAllDocuments(text, { lineCounter, prettyErrors: false });
  // parseAllDocuments returns an EmptyStream (not an array) for empty input.
  const documents = Array.isArray(parsed) ? parsed : [];
  const documentsOut: unknown[] = [];
  for (const document of documents) {
    const error = document.errors[0];
    if (error !== undefined) {
      return { ok: false, error: `${file}:${lineCounter.linePos(error.pos[0]).line}: ${error.message}` };
    }
    let value: unknown;
    try {
      value = document.toJS({ maxAliasCount: 100 });
    } catch (error) {
      // Alias problems (unknown anchor, alias bombs) only show when converting.
      const line = lineCounter.linePos(document.range[0]).line;
      return { ok: false, error: `${file}:${line}: ${(error as Error).message}` };
    }
    // An empty document (a stray `---`) holds nothing.
    if (value !== null && value !== undefined) documentsOut.push(value);
  }
  return { ok: true, documents: documentsOut };
}

/**
 * kubectl's JSON output can be large; JSON.parse is much faster than the YAML parser. Anything
 * that is not valid JSON goes to the YAML parser, which also gives the line of a syntax error.
 */
function parseJsonFast(text: string): unknown[] | undefined {
  const first = text.trimStart()[0];
  if (first !== '{' && first !== '[') return undefined;
  try {
    return [JSON.parse(text)];
  } catch {
    return parseJsonStream(text);
  }
}
