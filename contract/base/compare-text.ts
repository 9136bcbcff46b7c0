// The one order kproxy sorts text in, wherever an output must not depend on arrival order.

/** Plain code-unit order: deterministic and locale-independent. */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
