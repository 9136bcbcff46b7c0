// oomScoreAdj (kube-proxy's default -999): how readily the kernel's OOM killer picks kproxy, written
// to /proc/self/oom_score_adj at start. As kube-proxy, a failure is not fatal: lowering the score
// below what the process was started with needs CAP_SYS_RESOURCE, which an unprivileged kproxy
// lacks (the systemd unit sets OOMScoreAdjust=-999 itself, as root, so the write there is a no-op).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readNumber } from './conntrack-sysctls.ts';

export type OomScoreAdjResult =
  | { readonly applied: true; readonly from: number | undefined; readonly to: number }
  | { readonly applied: false; readonly to: number; readonly reason: string };

export async function applyOomScoreAdj(value: number, procRoot: string): Promise<OomScoreAdjResult> {
  const path = join(procRoot, 'self', 'oom_score_adj');
  try {
    const from = await readNumber(path);
    // r+: never create the file; one missing is no /proc, and the score cannot be set.
    if (from !== value) await writeFile(path, `${value}\n`, { flag: 'r+' });
    return { applied: true, from, to: value };
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    const why = code === 'EACCES' || code === 'EPERM' ? ' (a lower score needs CAP_SYS_RESOURCE)' : '';
    return { applied: false, to: value, reason: `${path}: ${code ?? message}${why}` };
  }
}
