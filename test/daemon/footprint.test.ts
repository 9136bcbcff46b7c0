// What the daemon loads stays what it uses: each module costs resident memory for the process's
// life (its source and code), and at 30,000 services the daemon's budget is tight.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../', import.meta.url));

test("loading kproxy (the daemon's modules) does not load Node's bundled undici", async () => {
  const script = `
    await import(${JSON.stringify(join(REPO, 'src/cli/main.ts'))});
    await import(${JSON.stringify(join(REPO, 'src/cli/run.ts'))});
    await import(${JSON.stringify(join(REPO, 'src/daemon/daemon.ts'))});
    console.log(JSON.stringify(process.moduleLoadList));`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: REPO });
  const loaded = JSON.parse(stdout) as string[];
  assert.ok(loaded.includes('NativeModule http'), 'the probe sees builtin modules');
  assert.deepEqual(
    loaded.filter((name) => name.includes('undici')),
    [],
    "an ES import of node:http loads Node's own undici (~11 MiB of RSS)",
  );
});
