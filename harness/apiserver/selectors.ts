// Label and field selectors as kube-apiserver parses them: comma-separated requirements, all of
// which must hold. Labels: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`.
// Fields: `metadata.name` and `metadata.namespace` with `=`, `==`, `!=`.

export type Requirement =
  | { readonly op: 'eq' | 'ne'; readonly key: string; readonly value: string }
  | { readonly op: 'exists' | 'notexists'; readonly key: string }
  | { readonly op: 'in' | 'notin'; readonly key: string; readonly values: readonly string[] };

export type Selector = readonly Requirement[];

export type ParseResult =
  | { readonly ok: true; readonly selector: Selector }
  | { readonly ok: false; readonly reason: string };

/** Splits on commas that are not inside `( )`. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

function parseRequirement(part: string): Requirement | string {
  const setMatch = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(part);
  if (setMatch) {
    const values = setMatch[3]!
      .split(',')
      .map((v) => v.trim())
      .filter((v) => v !== '');
    return { op: setMatch[2] as 'in' | 'notin', key: setMatch[1]!, values };
  }
  const neq = part.indexOf('!=');
  if (neq > 0) return { op: 'ne', key: part.slice(0, neq).trim(), value: part.slice(neq + 2).trim() };
  const eq = part.indexOf('=');
  if (eq > 0) {
    const value = part.slice(part.startsWith('==', eq) ? eq + 2 : eq + 1).trim();
    return { op: 'eq', key: part.slice(0, eq).trim(), value };
  }
  if (part.startsWith('!')) return { op: 'notexists', key: part.slice(1).trim() };
  if (/^[A-Za-z0-9./_-]+$/.test(part)) return { op: 'exists', key: part };
  return `unable to parse requirement: "${part}"`;
}

export function parseLabelSelector(text: string | null): ParseResult {
  const selector: Requirement[] = [];
  for (const part of splitTopLevel(text ?? '')) {
    const r = parseRequirement(part);
    if (typeof r === 'string') return { ok: false, reason: r };
    selector.push(r);
  }
  return { ok: true, selector };
}

const SUPPORTED_FIELDS = new Set(['metadata.name', 'metadata.namespace']);

export function parseFieldSelector(text: string | null): ParseResult {
  const parsed = parseLabelSelector(text);
  if (!parsed.ok) return parsed;
  for (const r of parsed.selector) {
    if (r.op !== 'eq' && r.op !== 'ne')
      return { ok: false, reason: `field selector "${r.key}": only = and != are supported` };
    if (!SUPPORTED_FIELDS.has(r.key)) return { ok: false, reason: `field label not supported: ${r.key}` };
  }
  return parsed;
}

/** Whether a label set (or, for field selectors, a field set) satisfies every requirement. */
export function matches(selector: Selector, values: Readonly<Record<string, string>>): boolean {
  for (const r of selector) {
    const has = Object.hasOwn(values, r.key);
    const v = values[r.key];
    switch (r.op) {
      case 'eq':
        if (v !== r.value) return false;
        break;
      case 'ne':
        if (v === r.value) return false;
        break;
      case 'exists':
        if (!has) return false;
        break;
      case 'notexists':
        if (has) return false;
        break;
      case 'in':
        if (v === undefined || !r.values.includes(v)) return false;
        break;
      case 'notin':
        if (v !== undefined && r.values.includes(v)) return false;
        break;
    }
  }
  return true;
}
