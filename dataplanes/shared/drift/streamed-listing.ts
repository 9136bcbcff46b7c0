// kproxy's own tables listed for the drift check without holding the listing: nft's output (24 MB
// at 30,000 Services × 10 endpoints) is read in pieces, each set's elements go to its
// ListedElements, and the rest (the table's chains, rules and set declarations: kilobytes) is kept
// as listed text for the parser.
import { randomBytes } from 'node:crypto';
import { type FileHandle, open, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataplaneError } from '../../../contract/dataplane-error.ts';
import type { CommandResult, CommandRunner } from '../command-runner.ts';
import type { NftFamily } from '../nft/transaction.ts';
import { ListedElements, listedElementText } from './listed-elements.ts';

/** nft's answer when the table does not exist: nothing to read, not a failure. */
const NO_TABLE = /No such file or directory/;

const SET_HEADER = /^\s*(?:set|map) (\S+) \{/;

export interface StreamedTables {
  /** Each family's listing without its set elements (`elements = { … }` left out). */
  readonly skeleton: string;
  /** Keyed "family set": the elements the kernel listed. */
  readonly elements: ReadonlyMap<string, ListedElements>;
  readonly unreadable: readonly string[];
}

/** `table` of each family as the kernel lists it now (an absent table lists as nothing). */
export async function streamTables(
  runner: CommandRunner,
  table: string,
  families: readonly NftFamily[],
): Promise<StreamedTables> {
  let skeleton = '';
  const elements = new Map<string, ListedElements>();
  const unreadable: string[] = [];
  for (const family of families) {
    const scanner = new ListingScanner((set) => {
      const listed = new ListedElements();
      elements.set(`${family} ${set}`, listed);
      return listed;
    });
    const result = await listNft(runner, ['list', 'table', family, table], (text) => scanner.feed(text));
    scanner.end();
    if (result.exitCode === 0) skeleton += scanner.skeleton;
    else {
      for (const key of [...elements.keys()]) if (key.startsWith(`${family} `)) elements.delete(key);
      if (!NO_TABLE.test(result.stderr)) unreadable.push(`table ${family} ${table}: ${result.stderr.trim()}`);
    }
  }
  return { skeleton, elements, unreadable };
}

/**
 * `nft args`, its listing handed to `onText` piece by piece. nft writes it into a private file (the
 * runner's runToFile), unlinked as soon as it is made, so nothing is left behind however this
 * ends, and it is read back in pieces; a runner without runToFile (tests') gives it whole.
 */
async function listNft(
  runner: CommandRunner,
  args: readonly string[],
  onText: (text: string) => void,
): Promise<CommandResult> {
  if (!runner.runToFile) {
    const result = await runner.run('nft', args);
    onText(result.stdout);
    return result;
  }
  const path = join(tmpdir(), `kproxy-${process.pid}-${randomBytes(8).toString('hex')}.listing`);
  let output: FileHandle;
  try {
    output = await open(path, 'wx+', 0o600);
    await unlink(path);
  } catch (error) {
    throw new DataplaneError(
      `cannot make the file for nft's listing at ${path}: ${(error as Error).message}`,
    );
  }
  try {
    const result = await runner.runToFile('nft', args, output);
    const decoder = new TextDecoder();
    const buffer = Buffer.alloc(1 << 16);
    for (let position = 0; ; ) {
      const { bytesRead } = await output.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      onText(decoder.decode(buffer.subarray(0, bytesRead), { stream: true }));
    }
    onText(decoder.decode());
    return result;
  } finally {
    await output.close();
  }
}

/**
 * One `nft list table` listing, line by line: `elements = { … }` of a set (to its closing brace,
 * over as many lines as it takes) goes to that set's elements one by one, split at the commas
 * outside quotes and braces; every other line to the skeleton.
 */
class ListingScanner {
  skeleton = '';
  readonly #elementsOf: (set: string) => ListedElements;
  #partial = '';
  #set: string | undefined;
  /** The set whose elements are being read, and the element text carried over from past lines. */
  #reading: ListedElements | undefined;
  #carried = '';
  #depth = 0;
  #quoted = false;

  constructor(elementsOf: (set: string) => ListedElements) {
    this.#elementsOf = elementsOf;
  }

  feed(text: string): void {
    const lines = (this.#partial + text).split('\n');
    this.#partial = lines.pop() ?? '';
    for (const line of lines) this.#line(line);
  }

  end(): void {
    if (this.#partial !== '') this.#line(this.#partial);
    this.#partial = '';
  }

  #line(line: string): void {
    if (this.#reading) {
      this.#elements(line, 0);
      return;
    }
    const opening = line.indexOf('elements = {');
    if (opening >= 0 && this.#set !== undefined && line.slice(0, opening).trim() === '') {
      this.#reading = this.#elementsOf(this.#set);
      this.#elements(line, opening + 'elements = {'.length);
      return;
    }
    this.skeleton += `${line}\n`;
    const header = SET_HEADER.exec(line);
    if (header) this.#set = header[1];
    else if (/^\s*(chain|table|flowtable|counter|quota)\b/.test(line)) this.#set = undefined;
  }

  /** Elements from `line[from…]` on, until the brace that closes them. */
  #elements(line: string, from: number): void {
    let start = from;
    for (let i = from; i < line.length; i++) {
      const char = line[i];
      if (this.#quoted) {
        if (char === '\\') i++;
        else if (char === '"') this.#quoted = false;
      } else if (char === '"') this.#quoted = true;
      else if (char === '{') this.#depth++;
      else if (char === '}' && this.#depth > 0) this.#depth--;
      else if (char === '}' || (char === ',' && this.#depth === 0)) {
        this.#element(line.slice(start, i));
        start = i + 1;
        if (char === '}') {
          this.#reading = undefined;
          const rest = line.slice(start).trim();
          if (rest !== '') this.skeleton += `${rest}\n`;
          return;
        }
      }
    }
    this.#carried += `${line.slice(start)} `;
  }

  #element(text: string): void {
    const whole = (this.#carried + text).trim();
    this.#carried = '';
    if (whole !== '') this.#reading?.add(listedElementText(whole));
  }
}
