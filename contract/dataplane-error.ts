// The one kind of failure a live dataplane recovers from by itself: the kernel side refused or did
// not finish a change (nft or iptables-restore exited non-zero, a command timed out, IPVS netlink
// said no). After one, the kernel may not hold what the record says, so an incremental sync falls
// back to a full one. Anything else thrown during a sync is a bug in kproxy: it is not papered over
// by a fallback that might well hide it, but fails the sync, which the daemon logs at error and
// counts (kproxy_sync_bugs_total), and the sync loop's retry is full.
export class DataplaneError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DataplaneError';
  }
}

/** A command did not finish in time and was killed; whatever it was doing may or may not have happened. */
export class CommandTimeoutError extends DataplaneError {
  /** The tool, e.g. "nft" or "iptables-legacy-restore". */
  readonly command: string;
  readonly timeoutMs: number;
  constructor(command: string, timeoutMs: number, what = command) {
    super(`${what} did not finish within ${timeoutMs / 1000} s and was killed`);
    this.name = 'CommandTimeoutError';
    this.command = command;
    this.timeoutMs = timeoutMs;
  }
}
