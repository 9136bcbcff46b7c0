// --input paths → validated Service, EndpointSlice and Node objects. Accepts what
// `kubectl get services,endpointslices,nodes -A -o yaml|json` prints (a List), multi-document YAML
// and single objects. A file that does not parse stops everything (a user error); an object that
// parses but is invalid is skipped with a warning so the rest still renders.
import { decodeObject } from '../kube/decode.ts';
import type { KubeObject } from '../kube/objects.ts';
import { readInputs } from './input-files.ts';
import { parseDocuments } from './parse-documents.ts';

/** An object that was skipped: `object` names it ("Service default/web"), `reason` says why. */
export interface SourceWarning {
  readonly file: string;
  readonly object: string;
  readonly reason: string;
}

export type ReadObjectsResult =
  | {
      readonly ok: true;
      readonly objects: readonly KubeObject[];
      readonly warnings: readonly SourceWarning[];
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
  for (const { file, text } of read.inputs) {
    const parsed = parseDocuments(text, file);
    if (!parsed.ok) return parsed;
    for (const raw of parsed.documents.flatMap(listItems)) {
      const decoded = decodeObject(raw);
      if (decoded.kind === 'object') objects.push(decoded.object);
      else if (decoded.kind === 'invalid') warnings.push({ file, ...decoded.problem });
    }
  }
  return { ok: true, objects, warnings };
}

/** The line printed (after "warning: ") for a skipped object. */
export function formatSourceWarning(warning: SourceWarning): string {
  return `${warning.file}: ${warning.object} skipped: ${warning.reason}`;
}

/**
 * A v1 List (or ServiceList, ...) and a JSON array stand for their items; anything else for itself.
 * Only one level of array: deeper (or cyclic, via YAML aliases) arrays are invalid objects, not a
 * stack overflow.
 */
function listItems(document: unknown): unknown[] {
  return Array.isArray(document) ? document.flatMap(listOrObject) : listOrObject(document);
}

function listOrObject(document: unknown): unknown[] {
  if (typeof document === 'object' && document !== null) {
    const { kind, items } = document as { kind?: unknown; items?: unknown };
    if (typeof kind === 'string' && kind.endsWith('List') && Array.isArray(items)) return items;
  }
  return [document];
}
