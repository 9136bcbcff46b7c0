// Each service's slice records (endpoints.ts), in slice-name order, stored compactly for the
// incremental model (model-cache.ts): a service's one slice (the usual case) alone, not in an
// array of one (56 bytes, 1.6 MiB at 30k services).
import { bySliceName, type SliceEndpoints } from './endpoints.ts';

function isOneSlice(kept: SliceEndpoints | readonly SliceEndpoints[]): kept is SliceEndpoints {
  return !Array.isArray(kept);
}

export class SlicesOfService {
  /** Service "namespace/name" → the records of its slices. */
  readonly #byService = new Map<string, SliceEndpoints | readonly SliceEndpoints[]>();

  of(service: string): readonly SliceEndpoints[] {
    const kept = this.#byService.get(service);
    if (kept === undefined) return [];
    return isOneSlice(kept) ? [kept] : kept;
  }

  /** The owner string a service's slices hold, if it has any (no array made for it). */
  ownerOf(service: string): string | undefined {
    const kept = this.#byService.get(service);
    if (kept === undefined) return undefined;
    return isOneSlice(kept) ? kept.owner : kept[0]?.owner;
  }

  add(record: SliceEndpoints): void {
    this.#set(record.owner, this.of(record.owner).concat(record).sort(bySliceName));
  }

  delete(record: SliceEndpoints): void {
    this.#set(
      record.owner,
      this.of(record.owner).filter((other) => other !== record),
    );
  }

  #set(service: string, records: readonly SliceEndpoints[]): void {
    if (records.length === 0) this.#byService.delete(service);
    else this.#byService.set(service, records.length === 1 ? records[0]! : records);
  }
}
