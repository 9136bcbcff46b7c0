// A stand-in for the daemon at its most fragile moment: it hands one large script to the real nft
// runner inside a namespace and reports when nft has committed it. nft-runner-kill.test.ts kills it
// in the middle. Usage: node feed-nft-main.ts NETNS SCRIPT_FILE
import { readFile } from 'node:fs/promises';
import { commandNftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';

const [ns, scriptFile] = process.argv.slice(2);
if (ns === undefined || scriptFile === undefined)
  throw new Error('usage: feed-nft-main.ts NETNS SCRIPT_FILE');
const nft = commandNftRunner(execaRunner(['ip', 'netns', 'exec', ns]));
await nft.run(await readFile(scriptFile, 'utf8'));
process.stdout.write('committed\n');
