// undici's index module loads the whole package (fetch, WebSocket, EventSource, mocks, caches,
// interceptors): about 6 MB of private memory in each thread that imports it, where the gateway
// uses three dispatchers and their request API. This module loads those alone and gives them the
// request API the way undici's index does; the classes and their types are undici's own
// (undici-modules.d.ts).
import api from 'undici/lib/api/index.js';
import Agent from 'undici/lib/dispatcher/agent.js';
import Dispatcher from 'undici/lib/dispatcher/dispatcher.js';
import Pool from 'undici/lib/dispatcher/pool.js';
import ProxyAgent from 'undici/lib/dispatcher/proxy-agent.js';

Object.assign(Dispatcher.prototype, api);

export { Agent, Pool, ProxyAgent };
