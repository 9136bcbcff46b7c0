// The two undici dispatchers the API client uses, loaded from their own modules. undici's index
// loads all of undici (fetch, WebSocket, caches, mocks, EventSource: ~110 modules), and V8 keeps
// every loaded module's source text in the heap for the daemon's lifetime: 1.9 MB of undici's
// alone at 30,000 services. These modules are a third of that (docs/benchmarks-log.md).
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const require = createRequire(import.meta.url);

// request() and its siblings, as undici's index adds them to every dispatcher.
const Dispatcher = require('undici/lib/dispatcher/dispatcher.js') as typeof Undici.Dispatcher;
Object.assign(Dispatcher.prototype, require('undici/lib/api/index.js'));

export const Agent = require('undici/lib/dispatcher/agent.js') as typeof Undici.Agent;
export const ProxyAgent = require('undici/lib/dispatcher/proxy-agent.js') as typeof Undici.ProxyAgent;
export type { Dispatcher } from 'undici';
