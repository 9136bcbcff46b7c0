// No import runs back up between the tree's parts (docs/architecture.md, "Layers"): the contract
// imports nothing of ours; the dataplanes import the contract and what they share, never src/;
// within src/, the parts below the wiring (cli, daemon) import only parts below them. A new import
// that crosses a line the table does not allow fails here, naming the file and the import.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { test } from 'node:test';

const ROOT = join(import.meta.dirname, '../..');

/** Each part and the parts it may import (besides itself). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  contract: [],
  'dataplanes/shared': ['contract'],
  'dataplanes/nftables': ['contract', 'dataplanes/shared'],
  'dataplanes/iptables': ['contract', 'dataplanes/shared'],
  'dataplanes/ipvs': ['contract', 'dataplanes/shared'],
  'src/kube': ['contract'],
  'src/sources': ['contract', 'src/kube'],
  'src/model': ['contract', 'src/kube'],
  'src/config': ['contract', 'src/kube', 'src/sources', 'src/model'],
  'src/sync': ['contract', 'src/kube', 'src/model'],
  // The wiring: the daemon builds a dataplane through the function each one exports.
  'src/daemon': ['contract', 'src/kube', 'src/model', 'src/config', 'src/sync', 'dataplanes'],
  'src/cli': [
    'contract',
    'src/kube',
    'src/sources',
    'src/model',
    'src/config',
    'src/sync',
    'src/daemon',
    'dataplanes',
  ],
  bin: ['src/cli'],
};

/** The part a path belongs to: the longest key of MAY_IMPORT it lies under. */
function partOf(path: string): string | undefined {
  let found: string | undefined;
  for (const part of Object.keys(MAY_IMPORT)) {
    if ((path === part || path.startsWith(`${part}/`)) && part.length > (found?.length ?? 0)) found = part;
  }
  return found;
}

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (entry.name.endsWith('.ts')) yield path;
  }
}

const IMPORT = /(?:\bfrom\s+|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

test('no import runs back up between the parts of the tree', () => {
  const wrong: string[] = [];
  let checked = 0;
  for (const top of ['bin', 'contract', 'src', 'dataplanes']) {
    for (const file of sourceFiles(top)) {
      const from = partOf(file);
      assert.ok(from, `${file} belongs to no part of the table: add its folder`);
      for (const [, specifier] of readFileSync(join(ROOT, file), 'utf8').matchAll(IMPORT)) {
        const target = normalize(join(dirname(file), specifier!));
        const to = partOf(target) ?? relative('.', target);
        checked++;
        const allowed = MAY_IMPORT[from]!;
        if (to === from || allowed.some((part) => to === part || to.startsWith(`${part}/`))) continue;
        wrong.push(
          `${file} imports ${target} (${from} may import ${allowed.join(', ') || 'nothing of ours'})`,
        );
      }
    }
  }
  assert.ok(checked > 500, `only ${checked} imports read: is the pattern still right?`);
  assert.deepEqual(wrong, []);
});

/** Tarjan's strongly connected components of `edges`, those with more than one file. */
function circles(edges: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of edges.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let top: string;
    do {
      top = stack.pop()!;
      onStack.delete(top);
      component.push(top);
    } while (top !== file);
    if (component.length > 1) found.push(component.sort());
  };
  for (const file of [...edges.keys()].sort()) if (!index.has(file)) visit(file);
  return found;
}

// A circle, even of type imports, means two modules are one job split in two, or share a piece
// that belongs in a third: either way a reader cannot read one without the other.
test('no two modules import each other, directly or around a circle', () => {
  const edges = new Map<string, string[]>();
  for (const top of ['bin', 'contract', 'src', 'dataplanes']) {
    for (const file of sourceFiles(top)) {
      const targets = [...readFileSync(join(ROOT, file), 'utf8').matchAll(IMPORT)].map(([, specifier]) =>
        normalize(join(dirname(file), specifier!)),
      );
      edges.set(file, targets);
    }
  }
  assert.deepEqual(circles(edges), []);
});
