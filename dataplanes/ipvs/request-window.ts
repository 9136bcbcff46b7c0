// A bounded window of IPVS requests in flight. The kernel handles one netlink socket's requests in
// order and answers each by its sequence number, so sending the next request before the last one
// is answered changes nothing the kernel does; it only spares a round trip through the event loop
// per request, which is most of a cold sync's time (docs/benchmarks.md, the IPVS section).

/**
 * How many IPVS commands may be unanswered at once. Each answer waits in the socket's receive
 * buffer until the event loop reads it, and the kernel drops an answer that does not fit (the
 * request then times out). A command's acknowledgement is one small skb, under ~1.3 KiB of buffer
 * with its overhead even when it is an error that copies the request back, so 64 of them stay far
 * inside the default receive buffer (net.core.rmem_default, 208 KiB); beyond a few dozen the
 * round trips saved no longer show in a cold sync.
 */
export const IPVS_REQUESTS_IN_FLIGHT = 64;

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
