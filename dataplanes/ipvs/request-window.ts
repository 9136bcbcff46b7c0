// A bounded window of IPVS commands in flight, sent several to a datagram. The kernel handles one
// netlink socket's requests in order and answers each by its sequence number, so sending the next
// commands before the last ones are answered changes nothing the kernel does; it only spares a
// round trip through the event loop per command, and framing several commands into one sendmsg
// spares a syscall and the per-request work of each (shared/netlink-socket.ts;
// docs/benchmarks-log.md, the IPVS section).

/**
 * How many IPVS commands go in one datagram (one sendmsg). Each is ~150 bytes, so a datagram
 * stays a few KiB, far inside the socket's send buffer (net.core.wmem_default, 208 KiB), and the
 * per-send costs left are spread over this many commands.
 */
export const IPVS_COMMANDS_PER_SEND = 32;

/**
 * How many datagrams may be unanswered at once. Each answer waits in the socket's receive buffer
 * until the event loop reads it, and the kernel drops an answer that does not fit (the send then
 * times out). A command is answered when it is refused (an acknowledgement copying the request
 * back, under ~1.3 KiB of buffer with its overhead) and a datagram's last one always is, so
 * 2 × 32 commands unanswered stay far inside the default receive buffer (net.core.rmem_default,
 * 208 KiB); beyond a few dozen commands in flight the round trips saved no longer show.
 */
export const IPVS_SENDS_IN_FLIGHT = 2;

/** `items` in runs of `size` (the last one shorter), in order. */
export function* runsOf<T>(items: readonly T[], size: number): Generator<T[]> {
  for (let at = 0; at < items.length; at += size) yield items.slice(at, at + size);
}

/**
 * Sends `send(item)` for each item in order, with at most `size` unsettled at once, and settles
 * once all did. The first item (in order) whose send fails fails the whole: no later item is sent
 * after that failure is seen, the ones already in flight are waited for (their answers, and what
 * each send records on success, are not left behind), and the error is that item's own. Dumps
 * must not go through here: the kernel refuses a second dump on a socket while one is running.
 */
export async function sendInWindow<T>(
  items: Iterable<T>,
  size: number,
  send: (item: T) => Promise<void>,
): Promise<void> {
  if (!(size >= 1)) throw new Error(`a request window needs room for one request, not ${size}`);
  const inFlight: Promise<void>[] = [];
  try {
    for (const item of items) {
      if (inFlight.length === size) await inFlight.shift();
      const sent = send(item);
      // Awaited in turn below; a later request failing first must not count as unhandled.
      sent.catch(() => {});
      inFlight.push(sent);
    }
    while (inFlight.length > 0) await inFlight.shift();
  } catch (err) {
    await Promise.allSettled(inFlight);
    throw err;
  }
}
