// A KubeProxyConfiguration YAML file → the settings it makes, checked field by field against
// CONFIG_FIELDS. Unknown fields are errors (a typo must not silently fall back to a default).
import { parseDocuments } from '../sources/parse-documents.ts';
import { CONFIG_FIELDS, type FieldValue, parseFieldValue, show } from './config-fields.ts';

/** Field path ("iptables.masqueradeBit") → value; unset fields are absent. */
export type Settings = ReadonlyMap<string, FieldValue>;

export type SettingsResult =
  | { readonly ok: true; readonly settings: Settings }
  | { readonly ok: false; readonly error: string };

export const CONFIG_API_VERSION = 'kubeproxy.config.k8s.io/v1alpha1';
export const CONFIG_KIND = 'KubeProxyConfiguration';

/** "iptables", "conntrack", ...: paths whose value is a mapping of further fields. */
const SECTIONS: ReadonlySet<string> = new Set(
  [...CONFIG_FIELDS.keys()]
    .filter((path) => path.includes('.'))
    .map((path) => path.slice(0, path.indexOf('.'))),
);

export function parseConfigFile(text: string, file: string): SettingsResult {
  const parsed = parseDocuments(text, file);
  if (!parsed.ok) return parsed;
  if (parsed.documents.length !== 1) {
    return {
      ok: false,
      error: `${file}: expected one ${CONFIG_KIND} document, found ${parsed.documents.length}`,
    };
  }
  const document = parsed.documents[0];
  if (!isMapping(document)) return { ok: false, error: `${file}: expected a ${CONFIG_KIND} mapping` };
  const { apiVersion, kind, ...fields } = document;
  if (kind !== CONFIG_KIND) return { ok: false, error: `${file}: kind: ${show(kind)} is not ${CONFIG_KIND}` };
  if (apiVersion !== CONFIG_API_VERSION) {
    return { ok: false, error: `${file}: apiVersion: ${show(apiVersion)} is not ${CONFIG_API_VERSION}` };
  }
  const settings = new Map<string, FieldValue>();
  const error = collectFields(fields, '', settings);
  return error === undefined ? { ok: true, settings } : { ok: false, error: `${file}: ${error}` };
}

/** Adds the set fields of `mapping` (at `prefix`) to `settings`; returns the first problem. */
function collectFields(
  mapping: Readonly<Record<string, unknown>>,
  prefix: string,
  settings: Map<string, FieldValue>,
): string | undefined {
  for (const [name, raw] of Object.entries(mapping)) {
    const path = prefix + name;
    const spec = CONFIG_FIELDS.get(path);
    if (spec !== undefined) {
      const parsed = parseFieldValue(spec, raw);
      if (!parsed.ok) return `${path}: ${parsed.reason}`;
      if (parsed.value !== undefined) settings.set(path, parsed.value);
    } else if (prefix === '' && SECTIONS.has(name)) {
      if (raw === null) continue;
      if (!isMapping(raw)) return `${path}: ${show(raw)} is not a mapping`;
      const error = collectFields(raw, `${path}.`, settings);
      if (error !== undefined) return error;
    } else {
      return `unknown field ${show(path)}`;
    }
  }
  return undefined;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
