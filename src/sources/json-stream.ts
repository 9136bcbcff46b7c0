// JSON values one after another, as `kubectl cluster-info dump` prints them to stdout: a NodeList,
// then each namespace's EventList, ServiceList, ..., PodList, each pod's container logs between a
// "==== START logs for container c of pod ns/p ====" line and its "==== END logs ..." line (log
// text is not JSON and is passed over). Also what `kubectl get ... -o json >> file` run twice leaves.

const LOG_START = '==== START logs for ';
const LOG_END = '==== END logs for ';

/** The values in order, or undefined when the text is anything else (the caller reports why). */
export function parseJsonStream(text: string): unknown[] | undefined {
  const values: unknown[] = [];
  let at = skipSpace(text, 0);
  while (at < text.length) {
    if (text.startsWith(LOG_START, at)) {
      const lineEnd = endOfLine(text, at);
      // The END line names the same container and pod as its START line.
      const endLine = LOG_END + text.slice(at + LOG_START.length, lineEnd);
      const end = text.indexOf(endLine, lineEnd);
      if (end === -1) return undefined;
      at = skipSpace(text, end + endLine.length);
      continue;
    }
    const end = endOfValue(text, at);
    if (end === undefined) return undefined;
    try {
      values.push(JSON.parse(text.slice(at, end)));
    } catch {
      return undefined;
    }
    at = skipSpace(text, end);
  }
  return values;
}

/** Where the object or array starting at `start` ends (one past its closing bracket). */
function endOfValue(text: string, start: number): number | undefined {
  const first = text[start];
  if (first !== '{' && first !== '[') return undefined;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if ((c === '}' || c === ']') && --depth === 0) return i + 1;
  }
  return undefined;
}

function endOfLine(text: string, from: number): number {
  const newline = text.indexOf('\n', from);
  return newline === -1 ? text.length : newline;
}

function skipSpace(text: string, from: number): number {
  let at = from;
  while (at < text.length && /\s/.test(text[at]!)) at++;
  return at;
}
