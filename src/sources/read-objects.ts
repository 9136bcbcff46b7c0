// --input paths → validated Service, EndpointSlice, Node and ServiceCIDR objects. Accepts what
// `kubectl get services,endpointslices,nodes -A -o yaml|json` prints (a List), typed lists
// (`kubectl get --raw`, `kubectl cluster-info dump`), multi-document YAML and single objects. A
// file that does not parse stops everything (a user error); an object that parses but is invalid
// is skipped with a warning so the rest still renders; what kproxy does not use is reported once
// per file and kind (unused-objects.ts).
import { decodeObject } from '../kube/decode.ts';
import type { KubeObject } from '../kube/objects.ts';
import { readInputs } from './input-files.ts';
import { listItems } from './list-items.ts';
import { parseDocuments } from './parse-documents.ts';
import { type FileObjects, reportUnused, type SourceWarning, type UnusedObject } from './unused-objects.ts';

export type { SourceWarning } from './unused-objects.ts';

export type ReadObjectsResult =
  | {
      readonly ok: true;
      readonly objects: readonly KubeObject[];
      /** Objects skipped, and input that leaves Services without their rules: --strict fails on these. */
      readonly warnings: readonly SourceWarning[];
      /** Objects of kinds kproxy does not read, once per file and kind: information only. */
      readonly notes: readonly SourceWarning[];
    }
  | { readonly ok: false; readonly error: string };

export async function readObjects(
  paths: readonly string[],
  readStdin: () => Promise<string>,
): Promise<ReadObjectsResult> {
  const read = await readInputs(paths, readStdin);
  if (!read.ok) return read;
  const objects: KubeObject[] = [];
  const warnings: SourceWarning[] = [];
  const files: FileObjects[] = [];
  for (const { file, text } of read.inputs) {
    const parsed = parseDocuments(text, file);
    if (!parsed.ok) return parsed;
    const first = objects.length;
    const unused: UnusedObject[] = [];
    for (const raw of parsed.documents.flatMap(listItems)) {
      const decoded = decodeObject(raw);
      if (decoded.kind === 'object') objects.push(decoded.object);
      else if (decoded.kind === 'invalid') warnings.push({ file, ...decoded.problem });
      else {
        const kind = String((raw as { kind: unknown }).kind);
        unused.push({ kind, object: decoded.object, reason: decoded.reason });
      }
    }
    files.push({ file, objects: objects.slice(first), unused });
  }
  const report = reportUnused(files);
  return { ok: true, objects, warnings: [...warnings, ...report.warnings], notes: report.notes };
}

/** The line printed (after "warning: ") for a skipped object. */
export function formatSourceWarning(warning: SourceWarning): string {
  return `${warning.file}: ${warning.object} skipped: ${warning.reason}`;
}

/** The line printed (after "note: ") for objects kproxy does not use, or cannot complete. */
export function formatSourceNote(note: SourceWarning): string {
  return `${note.file}: ${note.object} ${note.reason}`;
}
