// Keys the model keeps for every service, port and slice are built from parts. A template literal
// of 13 characters or more is a tree of its parts in V8 (a 32-byte node per join, kept as long as
// the key is), so a kept key is joined into one flat string instead.

/** The parts as one flat string. */
export function flatText(...parts: readonly string[]): string {
  return parts.join('');
}
