// The bare cost of listing a cluster: every Service and EndpointSlice from the API server in pages
// of 500 (client-go's and kproxy's informer page size), the two lists side by side as the informers
// run them, each page parsed. No decoding into objects, no model: the floor that any proxy's first
// sync starts from. Prints one JSON line. Run in the API server's netns.
//   node bench/bare-list.ts URL
import { performance } from 'node:perf_hooks';
import { request } from 'undici';

const base = process.argv[2];
if (base === undefined) throw new Error('usage: bare-list.ts URL');

const PAGE = 500;

async function listAll(path: string): Promise<number> {
  let items = 0;
  let next: string | undefined;
  do {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (next) query.set('continue', next);
    const response = await request(`${base}${path}?${query}`);
    if (response.statusCode !== 200) throw new Error(`${path}: HTTP ${response.statusCode}`);
    const page = (await response.body.json()) as { items: unknown[]; metadata: { continue?: string } };
    items += page.items.length;
    next = page.metadata.continue;
  } while (next);
  return items;
}

const started = performance.now();
const [services, slices] = await Promise.all([
  listAll('/api/v1/services'),
  listAll('/apis/discovery.k8s.io/v1/endpointslices'),
]);
const listMs = performance.now() - started;
process.stdout.write(`${JSON.stringify({ listMs: Math.round(listMs), services, slices })}\n`);
