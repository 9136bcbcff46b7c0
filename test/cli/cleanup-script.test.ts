// `kproxy cleanup --script` (issue 31): the removals `kproxy cleanup` makes, as a shell script that
// needs nothing of kproxy's (the package's purge runs it once kproxy is gone). Through a real /bin/sh:
// inputs reach their tools unchanged, a removal runs only while its checks hold, and a failure or a
// missing tool is reported and counted, not fatal. On a real kernel (a lab namespace): after the
// script, `kproxy cleanup` finds nothing of kproxy's in nftables or either iptables backend, other
// owners' rules are all there, even with a rule put before kproxy's jump after the script was
// written; a table gone since is not made again, and a second run (nothing left) changes nothing.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import type { CleanupCommand } from '../../contract/dataplane.ts';
import { IptablesDataplane } from '../../dataplanes/iptables/live.ts';
import { buildNftablesDataplane } from '../../dataplanes/nftables/build.ts';
import { execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { endpoint, ipv4, servicePort } from '../../harness/proxy-states.ts';
import { cleanupCommand } from '../../src/cli/cleanup.ts';
import { cleanupScript } from '../../src/cli/cleanup-script.ts';
import { captureIO } from './capture-io.ts';

/** What rule text holds that a shell would expand or end early if it were not quoted. */
const AWKWARD = '-A X -m comment --comment "ns/$HOME:80 `id` $(id) \\\\ it\'s" -j ACCEPT\nEOF\n';

function sh(script: string) {
  return spawnSync('sh', ['-c', script], { encoding: 'utf8' });
}

describe('the cleanup script, through /bin/sh', () => {
  test('a removal gets its input unchanged and is reported once for all its parts', () => {
    const parts: CleanupCommand[] = [1, 2].map(() => ({
      what: 'two parts',
      command: 'cat',
      args: [],
      input: AWKWARD,
      when: [{ command: 'printf', args: ['a\\n*nat\\n'], printsLine: '*nat' }],
    }));
    const result = sh(cleanupScript(parts));
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, `${AWKWARD}${AWKWARD}removed two parts\n`);
  });

  test('a check that fails skips its removal quietly; a removal that fails is reported, and the rest run', () => {
    const commands: CleanupCommand[] = [
      { what: 'gone since', command: 'echo', args: ['ran'], when: [{ command: 'false', args: [] }] },
      {
        what: 'not that table',
        command: 'echo',
        args: ['ran'],
        when: [{ command: 'printf', args: ['*filter\\n'], printsLine: '*nat' }],
      },
      { what: 'refused', command: 'false', args: [], when: [] },
      { what: 'after', command: 'true', args: [], when: [{ command: 'true', args: [] }] },
    ];
    const result = sh(cleanupScript(commands));
    assert.equal(result.status, 1);
    assert.equal(result.stdout, 'removed after\n');
    assert.equal(result.stderr, 'kproxy: could not remove refused\n');
  });

  test('a removal whose tool is missing is left, said once for all its parts', () => {
    const missing = {
      what: 'IPVS: 2 virtual service(s)',
      command: 'kproxy-no-such-tool',
      args: [],
      when: [],
    };
    const result = sh(cleanupScript([missing, missing]));
    assert.equal(result.status, 1);
    assert.equal(result.stdout, '');
    assert.equal(
      result.stderr,
      'kproxy: left IPVS: 2 virtual service(s): kproxy-no-such-tool is not installed\n',
    );
  });
});

describe('the cleanup script on a real kernel', () => {
  test('removes what kproxy cleanup would, in nftables and both iptables backends, and nothing else', async (t) => {
    if (!requireRoot(t)) return;
    const lab = new Lab(`cscript${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    const runner = execaRunner(['ip', 'netns', 'exec', ns]);
    const state = ipv4([
      servicePort('web', {
        clusterIP: '10.96.0.10',
        nodePort: 30080,
        clusterEndpoints: [endpoint('10.244.0.5')],
      }),
    ]);
    // Other owners' rules: an nft table, and an iptables chain jumped to from the hook kproxy uses.
    await lab.exec(ns, 'nft', ['add table ip foreign; add chain ip foreign c; add rule ip foreign c accept']);
    const foreignNat = '*nat\n:FOREIGN - [0:0]\n-A PREROUTING -j FOREIGN\n-A FOREIGN -j RETURN\nCOMMIT\n';
    await lab.exec(ns, 'iptables-nft-restore', ['--noflush'], { input: foreignNat });
    const nftables = buildNftablesDataplane({ runner, log: () => {} });
    await nftables.start();
    await nftables.sync(state, 'full');
    for (const backend of ['nft', 'legacy'] as const) {
      const iptables = new IptablesDataplane({ runner, backend });
      await iptables.start();
      await iptables.sync(state, 'full');
    }
    const io = captureIO();
    assert.equal(await cleanupCommand(['--script'], io.io, runner), 0, io.stderr());
    const script = io.stdout();
    // Written before the kernel changed: another rule before kproxy's jump in PREROUTING, and
    // iptables-nft's filter table gone (kproxy's chains there with it), which no removal may make again.
    await lab.exec(ns, 'iptables-nft', ['-t', 'nat', '-I', 'PREROUTING', '1', '-j', 'FOREIGN']);
    await lab.exec(ns, 'nft', ['delete', 'table', 'ip', 'filter']);
    const foreignBefore = await foreignRules(lab, ns);

    const first = await lab.exec(ns, 'sh', ['-c', script], { reject: false });
    assert.equal(first.exitCode, 0, first.stderr);
    assert.equal(first.stderr, '');
    assert.match(first.stdout, /^removed nft table ip kproxy$/m);
    assert.match(first.stdout, /^removed iptables-legacy nat: \d+ kproxy chain\(s\)$/m);
    const after = captureIO();
    assert.equal(await cleanupCommand([], after.io, runner), 0, after.stderr());
    assert.equal(
      after.stdout(),
      'no kproxy nftables rules found\nno kproxy iptables rules found\nno kproxy ipvs rules found\n',
    );
    assert.deepEqual(await foreignRules(lab, ns), foreignBefore);

    // Nothing left: the checks skip every removal; no table is made to be emptied.
    const legacyTables = await lab.exec(ns, 'cat', [
      '/proc/net/ip_tables_names',
      '/proc/net/ip6_tables_names',
    ]);
    const second = await lab.exec(ns, 'sh', ['-c', script], { reject: false });
    assert.deepEqual([second.exitCode, second.stdout, second.stderr], [0, '', '']);
    assert.deepEqual(await foreignRules(lab, ns), foreignBefore);
    assert.equal(
      (await lab.exec(ns, 'cat', ['/proc/net/ip_tables_names', '/proc/net/ip6_tables_names'])).stdout,
      legacyTables.stdout,
    );
    assert.doesNotMatch((await lab.exec(ns, 'nft', ['list', 'tables'])).stdout, /table ip filter/);
  });
});

/** Every rule and table of the namespace that is not kproxy's, in a stable form. */
async function foreignRules(lab: Lab, ns: string): Promise<string[]> {
  const nft = (await lab.exec(ns, 'nft', ['list', 'table', 'ip', 'foreign'])).stdout;
  const iptables = (await lab.exec(ns, 'iptables-nft-save', [])).stdout
    .split('\n')
    .filter((line) => !line.startsWith('#') && !line.includes('KPROXY'));
  return [nft, ...iptables];
}
