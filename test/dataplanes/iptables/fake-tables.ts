// An in-memory model of what iptables-restore --noflush does to our chains, for unit tests: a
// declared chain is created or flushed, -A appends, -I inserts (into a built-in chain, which
// exists without being declared), -D deletes a rule, -X deletes a chain, and each table section commits all-or-nothing. It checks references like the kernel does: a jump must name an existing chain
// (or a built-in target) and a referenced chain cannot be deleted.
const TARGETS = new Set(['ACCEPT', 'DROP', 'REJECT', 'RETURN', 'DNAT', 'MARK', 'MASQUERADE']);
const BUILT_IN = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

export class FakeTables {
  readonly #tables = new Map<string, Map<string, string[]>>();

  restore(input: string): void {
    let table: Map<string, string[]> | undefined;
    let name = '';
    for (const line of input.split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      if (line.startsWith('*')) {
        name = line.slice(1);
        table = structuredClone(this.#tables.get(name) ?? new Map<string, string[]>());
      } else if (table === undefined) {
        throw new Error(`restore: "${line}" outside a table`);
      } else if (line.startsWith(':')) {
        table.set(line.slice(1).split(' ')[0]!, []);
      } else if (line.startsWith('-A ')) {
        const chain = line.split(' ')[1]!;
        const rules = table.get(chain);
        if (rules === undefined) throw new Error(`restore: -A to missing chain ${chain}`);
        rules.push(line);
      } else if (line.startsWith('-I ')) {
        const [, chain, position, ...rule] = line.split(' ');
        if (!BUILT_IN.has(chain!))
          throw new Error(`restore: -I into ${chain}: only built-in chains expected`);
        const rules = table.get(chain!) ?? [];
        // Stored as iptables-save prints it.
        rules.splice(Number(position) - 1, 0, `-A ${chain} ${rule.join(' ')}`);
        table.set(chain!, rules);
      } else if (line.startsWith('-D ')) {
        const rules = table.get(line.split(' ')[1]!) ?? [];
        const at = rules.indexOf(`-A${line.slice(2)}`);
        if (at < 0) throw new Error(`restore: -D of a missing rule: ${line}`);
        rules.splice(at, 1);
      } else if (line.startsWith('-X ')) {
        if (!table.delete(line.slice(3))) throw new Error(`restore: -X of missing chain ${line.slice(3)}`);
      } else if (line === 'COMMIT') {
        checkReferences(name, table);
        this.#tables.set(name, table);
        table = undefined;
      } else {
        throw new Error(`restore: cannot parse "${line}"`);
      }
    }
  }

  /** Canonical text: tables and chains sorted, rules in order. */
  dump(): string {
    const out: string[] = [];
    for (const name of [...this.#tables.keys()].sort()) {
      const chains = this.#tables.get(name)!;
      out.push(`*${name}`);
      for (const chain of [...chains.keys()].sort()) out.push(`:${chain}`, ...chains.get(chain)!);
    }
    return out.join('\n');
  }

  /** The rules of one chain, as iptables-save prints them (none when it does not exist). */
  rules(table: string, chain: string): readonly string[] {
    return this.#tables.get(table)?.get(chain) ?? [];
  }

  chains(table: string): string[] {
    return [...(this.#tables.get(table)?.keys() ?? [])].sort();
  }
}

function checkReferences(name: string, table: Map<string, string[]>): void {
  for (const rules of table.values()) {
    for (const rule of rules) {
      const target = / -j (\S+)/.exec(rule)?.[1];
      if (target !== undefined && !TARGETS.has(target) && !table.has(target)) {
        throw new Error(`restore: *${name}: ${rule} jumps to missing chain ${target}`);
      }
    }
  }
}
