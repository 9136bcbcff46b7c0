// A KubeProxyConfiguration file → the settings it makes, decoded as kube-proxy's loadConfig
// decodes it: strictly first; when only unknown fields or repeated keys fail the strict decoding,
// leniently (unknown fields dropped, the last of repeated keys kept) with one warning, in
// kube-proxy's words. So kind's `metadata` and old kubeadm's `resourceContainer` load, as they do
// with kube-proxy. Values are checked field by field against
// CONFIG_FIELDS; a wrong value is an error naming the file, the field and the value as written.
import { LineCounter, parseAllDocuments } from 'yaml';
import { MAX_YAML_BYTES, parseDocuments } from '../sources/parse-documents.ts';
import { CONFIG_FIELDS, type FieldValue, inertValueMatters, parseFieldValue, show } from './config-fields.ts';

/** Field path ("iptables.masqueradeBit") → value; unset fields are absent. */
export type Settings = ReadonlyMap<string, FieldValue>;

export type SettingsResult =
  | { readonly ok: true; readonly settings: Settings }
  | { readonly ok: false; readonly error: string };

/** A config file's settings and what to warn about at start (each line names the file). */
export type ConfigFileResult =
  | { readonly ok: true; readonly settings: Settings; readonly warnings: readonly string[] }
  | { readonly ok: false; readonly error: string };

export const CONFIG_API_VERSION = 'kubeproxy.config.k8s.io/v1alpha1';
export const CONFIG_KIND = 'KubeProxyConfiguration';

/** "iptables", "logging", ...: paths whose value is a mapping of further fields. */
const SECTIONS: ReadonlySet<string> = new Set(
  [...CONFIG_FIELDS.keys()].flatMap((path) =>
    path
      .split('.')
      .slice(0, -1)
      .map((_, i, parts) => parts.slice(0, i + 1).join('.')),
  ),
);

interface Decoded {
  readonly settings: Map<string, FieldValue>;
  /** Fields the strict decoding refuses, by path. */
  readonly unknown: string[];
  /** Inert fields set to something that matters, with why they do nothing. */
  readonly inert: string[];
}

export function parseConfigFile(text: string, file: string): ConfigFileResult {
  const json = jsonSyntaxError(text, file);
  if (json !== undefined) return { ok: false, error: json };
  const strict = parseDocuments(text, file);
  let documents: readonly unknown[];
  let repeated: readonly string[] = [];
  if (strict.ok) {
    documents = strict.documents;
  } else {
    const lenient = text.length > MAX_YAML_BYTES ? undefined : repeatedKeys(text);
    if (lenient === undefined) return strict;
    ({ documents, lines: repeated } = lenient);
  }
  if (documents.length !== 1) {
    return { ok: false, error: `${file}: expected one ${CONFIG_KIND} document, found ${documents.length}` };
  }
  const document = documents[0];
  if (!isMapping(document)) return { ok: false, error: `${file}: expected a ${CONFIG_KIND} mapping` };
  const { apiVersion, kind, ...fields } = document;
  if (kind !== CONFIG_KIND) return { ok: false, error: `${file}: kind: ${show(kind)} is not ${CONFIG_KIND}` };
  if (apiVersion !== CONFIG_API_VERSION) {
    return { ok: false, error: `${file}: apiVersion: ${show(apiVersion)} is not ${CONFIG_API_VERSION}` };
  }
  const decoded: Decoded = { settings: new Map(), unknown: [], inert: [] };
  const error = collectFields(fields, '', decoded);
  if (error !== undefined) return { ok: false, error: `${file}: ${error}` };
  const warnings: string[] = [];
  // As kube-proxy's strict decoder, a repeated key stops it before the fields are looked at.
  const strictErrors =
    repeated.length > 0
      ? `yaml: unmarshal errors: ${repeated.join(', ')}`
      : decoded.unknown.map((path) => `unknown field ${show(path)}`).join(', ');
  if (strictErrors !== '') {
    warnings.push(
      `${file}: using lenient decoding as strict decoding failed: strict decoding error: ${strictErrors}`,
    );
  }
  for (const line of decoded.inert) warnings.push(`${file}: ${line}`);
  return { ok: true, settings: decoded.settings, warnings };
}

/** Adds the fields of `mapping` (at `prefix`) to `decoded`; returns the first wrong value. */
function collectFields(
  mapping: Readonly<Record<string, unknown>>,
  prefix: string,
  decoded: Decoded,
): string | undefined {
  for (const [name, raw] of Object.entries(mapping)) {
    const path = prefix + name;
    const spec = CONFIG_FIELDS.get(path);
    if (spec?.type === 'inert') {
      const typed = spec.shape ? parseFieldValue(spec.shape, raw) : undefined;
      if (typed?.ok === false) return `${path}: ${typed.reason}`;
      if (inertValueMatters(spec, raw))
        decoded.inert.push(`${path}: ${show(raw)} has no effect: ${spec.why}`);
    } else if (spec !== undefined) {
      const parsed = parseFieldValue(spec, raw);
      if (!parsed.ok) return `${path}: ${parsed.reason}`;
      if (parsed.value !== undefined) decoded.settings.set(path, parsed.value);
    } else if (SECTIONS.has(path)) {
      if (raw === null) continue;
      if (!isMapping(raw)) return `${path}: ${show(raw)} is not a mapping`;
      const error = collectFields(raw, `${path}.`, decoded);
      if (error !== undefined) return error;
    } else {
      decoded.unknown.push(path);
    }
  }
  return undefined;
}

/**
 * YAML whose only fault is a repeated key: kube-proxy's strict decoding refuses it, its lenient one
 * keeps the last value. The documents so read, and yaml.v2's line for each repeat; undefined when
 * the YAML has another fault.
 */
function repeatedKeys(
  text: string,
): { readonly documents: readonly unknown[]; readonly lines: readonly string[] } | undefined {
  const lineCounter = new LineCounter();
  const errors = parseAllDocuments(text, { lineCounter, prettyErrors: false }).flatMap((document) =>
    'errors' in document ? document.errors : [],
  );
  if (errors.length === 0 || errors.some((error) => error.code !== 'DUPLICATE_KEY')) return undefined;
  const lines = errors.map((error) => {
    const key = /^\s*("[^"]*"|'[^']*'|[^:\n]+?)\s*:/.exec(text.slice(error.pos[0]))?.[1] ?? '';
    return `line ${lineCounter.linePos(error.pos[0]).line}: key ${show(key.replace(/^["']|["']$/g, ''))} already set in map`;
  });
  const documents = parseAllDocuments(text, { uniqueKeys: false });
  const values = (Array.isArray(documents) ? documents : []).map((document) =>
    document.toJS({ maxAliasCount: 100 }),
  );
  return { documents: values.filter((value) => value !== null && value !== undefined), lines };
}

/**
 * A file that starts as JSON is decoded as JSON by kube-proxy, so its syntax error is JSON's, at
 * file:line:column (the YAML parser, which the shared document reader falls back to, would
 * describe it as broken YAML).
 */
function jsonSyntaxError(text: string, file: string): string | undefined {
  if (text.trimStart()[0] !== '{') return undefined;
  try {
    JSON.parse(text);
    return undefined;
  } catch (error) {
    const message = (error as Error).message;
    const at = /position (\d+)/.exec(message);
    const reason = message.replace(/ in JSON at position \d+.*$/, '').replace(/^JSON\.parse: /, '');
    if (at === null) return `${file}: not valid JSON: ${reason}`;
    const before = text.slice(0, Number(at[1]));
    const line = before.split('\n').length;
    const column = Number(at[1]) - before.lastIndexOf('\n');
    return `${file}:${line}:${column}: not valid JSON: ${reason}`;
  }
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
