// undici's index module loads the whole package (fetch, WebSocket, EventSource, mocks, caches,
// interceptors), where the gateway uses three dispatchers and their request API: imported into a
// bare Node, the index adds 10.5 MB of private memory, these three 4.5. This module loads them
// alone and gives them the request API the way undici's index does; the classes and their types
// are undici's own (undici-modules.d.ts).
import api from 'undici/lib/api/index.js';
import Agent from 'undici/lib/dispatcher/agent.js';
import Dispatcher from 'undici/lib/dispatcher/dispatcher.js';
import Pool from 'undici/lib/dispatcher/pool.js';
import ProxyAgent from 'undici/lib/dispatcher/proxy-agent.js';

Object.assign(Dispatcher.prototype, api);

export { Agent, Pool, ProxyAgent };
