// One set's elements as `nft list` printed them, held compactly for the drift check: at 30,000
// Services × 10 endpoints kproxy's tables hold ~450,000 elements, which as parsed objects (token
// arrays, one object each) took over a gigabyte. Here each element is its text, normalized as the
// comparison spells it (elementText: key parts joined by ` . `, then ` : ` and the value), in one
// byte buffer, with a hash index for finding the one a rendered element spells alike.
import { type NftElement, parseElements, tokenize } from '../trace/nft-ruleset.ts';

const VERDICT = /^(goto|jump|accept|drop|return|continue)$/;

/** An element as the comparison prints and matches it: its key, then its value. */
export function elementText({ key, value }: NftElement): string {
  if (!value) return key.join(' . ');
  return `${key.join(' . ')} : ${value.join(VERDICT.test(value[0] ?? '') ? ' ' : ' . ')}`;
}

/** An element's text from its listing (`a . b comment "x" : goto c`), as elementText spells it. */
export function listedElementText(listed: string): string {
  const [element] = parseElements(tokenize(listed));
  return element === undefined ? '' : elementText(element);
}

/** The index packs a hash and an element's position into one double: positions below 2^22. */
const POSITION_BITS = 2 ** 22;

/** FNV-1a over the UTF-16 units, 30 bits: with the position, within a double's 53 exact bits. */
function hash30(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0) % 2 ** 30;
}

/** The texts go into pages of this size (none spans two), not one buffer copied as it grows. */
const PAGE = 1 << 16;

export class ListedElements {
  readonly #pages: Buffer[] = [];
  /** Where each element's text starts and ends: page × PAGE + offset. */
  #starts = new Uint32Array(1024);
  #ends = new Uint32Array(1024);
  #count = 0;
  /** Elements a rendered element was matched with. */
  #matched = new Uint8Array(0);
  /** hash × POSITION_BITS + position, one per element: sorted at the first lookup. */
  #index = new Float64Array(1024);
  #sorted = false;

  get size(): number {
    return this.#count;
  }

  /** Adds an element's normalized text (listedElementText). */
  add(text: string): void {
    if (this.#sorted) throw new Error('elements added after the first lookup');
    const length = Buffer.byteLength(text);
    if (length > PAGE) throw new Error(`an element of ${length} bytes: ${text.slice(0, 80)}…`);
    let end = this.#count === 0 ? 0 : this.#ends[this.#count - 1]!;
    if (this.#pages.length * PAGE < end + length) {
      end = this.#pages.length * PAGE;
      this.#pages.push(Buffer.allocUnsafe(PAGE));
    }
    const page = this.#pages[Math.floor(end / PAGE)]!;
    page.write(text, end % PAGE);
    if (this.#count === this.#ends.length) {
      this.#starts = grown(this.#starts, new Uint32Array(this.#count * 2));
      this.#ends = grown(this.#ends, new Uint32Array(this.#count * 2));
      this.#index = grown(this.#index, new Float64Array(this.#count * 2));
    }
    this.#index[this.#count] = hash30(text) * POSITION_BITS + this.#count;
    this.#starts[this.#count] = end;
    this.#ends[this.#count++] = end + length;
  }

  text(position: number): string {
    const start = this.#starts[position]!;
    const offset = start % PAGE;
    return this.#pages[Math.floor(start / PAGE)]!.toString(
      'utf8',
      offset,
      offset + this.#ends[position]! - start,
    );
  }

  /**
   * Marks the element spelled `text` as matched. 'matched': one was unmatched; 'again': only one
   * matched before (`text` rendered twice); 'none': no element is spelled so. A set too large for
   * the index matches nothing, so all of it is compared the slow way.
   */
  match(text: string): 'matched' | 'again' | 'none' {
    if (this.#count >= POSITION_BITS) return 'none';
    const index = this.#indexed();
    const matched = this.#matched;
    const base = hash30(text) * POSITION_BITS;
    let low = 0;
    let high = index.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (index[middle]! < base) low = middle + 1;
      else high = middle;
    }
    let seen = false;
    for (let i = low; i < index.length && index[i]! < base + POSITION_BITS; i++) {
      const position = index[i]! - base;
      if (this.text(position) !== text) continue;
      if (matched[position] === 0) {
        matched[position] = 1;
        return 'matched';
      }
      seen = true;
    }
    return seen ? 'again' : 'none';
  }

  /** Forgets every match (the render deleted its table and starts it again). */
  unmatchAll(): void {
    this.#matched.fill(0);
  }

  unmatch(position: number): void {
    this.#matched[position] = 0;
  }

  isMatched(position: number): boolean {
    return this.#matched[position] === 1;
  }

  #indexed(): Float64Array {
    if (!this.#sorted) {
      this.#index = this.#index.slice(0, this.#count).sort();
      this.#matched = new Uint8Array(this.#count);
      this.#sorted = true;
    }
    return this.#index;
  }
}

function grown<T extends Uint32Array | Float64Array>(from: T, to: T): T {
  to.set(from);
  return to;
}
