// After a full sync V8 keeps the free heap pages of the sync's peak mapped: at 30,000 services
// ~270 MiB of RSS that neither idling (the memory reducer keeps waiting) nor a plain full
// collection gives back. A last-resort collection, what V8 does on a low-memory notification,
// does. Node offers it only as gc(), so the flag is set at run time. It costs one full collection
// (a few hundred ms at 30k services) per full sync, next to a full sync of seconds.
import v8 from 'node:v8';
import vm from 'node:vm';

/** A function that returns V8's free heap pages to the system. */
export function lastResortCollector(): () => void {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as (options: object) => void;
  return () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
