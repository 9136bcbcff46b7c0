// kproxy in the lab node's namespace for the IPVS takeover tests (kube-proxy-ipvs-takeover.vmtest.ts):
// `ip netns exec NODE node takeover-agent.ts NODE_IP [SERVICE_SET]` (takeover-services.ts; `takeover`
// when absent), one process for a whole chain (a node start costs seconds under TCG), since IPVS's
// netlink socket works in the namespace its process is in.
// Requests are JSON lines on stdin, each answered by a line `{"id":N,...}`; what a cleanup or a
// drain prints comes as `{"line":...}` lines as it happens.
//   {"id":1,"run":"ipvs","drainMs":5000}  kproxy run's dataplane in that mode (its start and first
//     full sync), wrapped as run wraps it (OtherModesCleanup: the other modes' cleanup after that
//     sync, beside it, IPVS's drain bounded by drainMs); answers once the sync returned
//   {"id":2,"cleaned":true}  answers when that cleanup has ended, with what it removed
//   {"id":3,"cleanup":["--kube-proxy",...]}  `kproxy cleanup ARGS`, answered with its exit code; wired
//     as the CLI wires it (IPVS and conntrack by netlink in this process, so in the node's namespace)
import { flushCompileCache } from 'node:module';
import { createInterface } from 'node:readline';
import type { DataplaneMode } from '../../../../contract/dataplane.ts';
import { cleanupCommand } from '../../../../src/cli/cleanup.ts';
import { createLogger } from '../../../../src/cli/logger.ts';
import { createLiveDataplane, LIVE_MODES } from '../../../../src/daemon/live-dataplanes.ts';
import { OtherModesCleanup } from '../../../../src/daemon/other-modes-cleanup.ts';
import { kproxyState, type ServiceSet } from './takeover-services.ts';

interface Request {
  readonly id: number;
  readonly run?: DataplaneMode;
  readonly drainMs?: number;
  readonly cleaned?: true;
  readonly cleanup?: string[];
}

const nodeIP = process.argv[2]!;
const services = (process.argv[3] ?? 'takeover') as ServiceSet;
const logger = createLogger('text', 'warn', process.stderr);
const say = (message: object) => process.stdout.write(`${JSON.stringify(message)}\n`);
const line = (text: string) => say({ line: text.trimEnd() });
let running: OtherModesCleanup | undefined;
let removed: string[] = [];

async function handle(request: Request): Promise<object> {
  if (request.run !== undefined) {
    const mode = request.run;
    removed = [];
    running = new OtherModesCleanup(
      await createLiveDataplane(mode, { logger }),
      () =>
        Promise.all(
          LIVE_MODES.filter((other) => other !== mode).map((other) =>
            createLiveDataplane(other, {
              logger,
              ipvsDrain: { timeoutMs: request.drainMs, report: line },
            }),
          ),
        ),
      {
        removed: (other, what) => removed.push(...what.map((w) => `${other}: ${w}`)),
        failed: (error) => line(`cleanup failed: ${String(error)}`),
      },
    );
    await running.start();
    return { synced: (await running.sync(kproxyState(nodeIP, services), 'full')).kind };
  }
  if (request.cleaned) {
    await running?.cleaned();
    return { removed };
  }
  const io = { stdout: { write: line }, stderr: { write: line }, stdin: (async function* () {})() };
  return { code: await cleanupCommand(request.cleanup ?? [], io) };
}

createInterface({ input: process.stdin }).on('line', (text) => {
  const request = JSON.parse(text) as Request;
  handle(request).then(
    (answer) => say({ id: request.id, ...answer }),
    (error: unknown) => say({ id: request.id, error: String(error) }),
  );
});
say({ ready: true });
// Ended by a signal, which writes no compile cache (NODE_COMPILE_CACHE): written now, or each VM
// run strips its TypeScript again.
flushCompileCache();
