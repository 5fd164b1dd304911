import { Hono, type Context } from 'hono';
import type { Logger } from 'pino';
import type { QueueWriter } from '../queue/queue-writer.js';
import type { Validator } from '../reading/parse-readings.js';
import type { ReceiveClock } from '../reading/receive-clock.js';
import type { GatewayStats } from '../stats.js';
import type { KeyStore, Principal } from '../keys/key-store.js';
import type { SinkDescription, TlsSummary } from '../health/snapshot.js';
import type { Reading } from '../reading/reading-schema.js';
import { apiKey } from './middleware/api-key/index.js';
import type { FailureDelay } from './middleware/api-key/failure-delay.js';
import { InflightBudget } from './inflight-budget.js';
import type { IdempotencyKeys } from './idempotency-keys.js';
import { problem } from './problem-details.js';
import { HEALTH_ROUTES, registerHealthRoutes } from './routes/health.js';
import { INGEST_ROUTES, registerIngestRoutes } from './routes/ingest.js';

export interface AppDeps {
  queue: QueueWriter;
  delivery: { notifyAppended(): void };
  clock: ReceiveClock;
  stats: GatewayStats;
  validator: Validator;
  logger: Logger;
  keys: KeyStore;
  failureDelay: FailureDelay;
  maxBodyBytes: number;
  maxInflightBytes: number;
  maxBatchReadings: number;
  harborId: string | undefined;
  isStopping: () => boolean;
  /** Aborted when the gateway starts to stop. */
  stopping: AbortSignal;
  version: string;
  tls?: () => TlsSummary;
  sinks?: readonly SinkDescription[];
  /** The local console and `/metrics` (src/console/): mounted ahead of the API, told what ingest accepted and refused. */
  console?: ConsoleHooks;
  /** Requests with an `Idempotency-Key` answered so far (`routes/ingest.ts`). */
  idempotency: IdempotencyKeys;
}

export interface ConsoleHooks {
  mount(app: Hono): void;
  /** Readings committed for a key: called on the request, so it must stay cheap. */
  accepted(principal: Principal, readings: readonly Reading[]): void;
  /** A request answered with an error, after its answer was made. */
  refused(c: Context): void;
}

/** The peer address of the connection; proxies are not trusted, so forwarding headers are ignored. */
const clientAddress = (c: Context): string =>
  (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket?.remoteAddress ?? 'unknown';

/** The HTTP API: ingest paths behind the API key, health and status, JSON errors for everything else. */
export function createApp(deps: AppDeps): Hono {
  // strict: false matches every path with and without a trailing slash, as existing clients use both.
  const app = new Hono({ strict: false });
  const requireApiKey = apiKey({
    keys: deps.keys,
    delay: deps.failureDelay,
    clientAddress,
    stopping: deps.stopping,
    logger: deps.logger,
  });

  // Ahead of the refusal count: the console's own answers are not the API's refusals.
  deps.console?.mount(app);
  app.use(async (c, next) => {
    await next();
    if (c.res.status >= 400) {
      deps.stats.refusedRequests += 1;
      deps.console?.refused(c);
    }
  });

  registerIngestRoutes(app, { ...deps, inflight: new InflightBudget(deps.maxInflightBytes) }, requireApiKey);
  registerHealthRoutes(app, { ...deps, requireApiKey });

  const allow = (methods: string) => (c: Context) =>
    problem(
      c,
      405,
      `Method ${c.req.method} not allowed; use ${methods}`,
      [{ loc: ['method'], msg: `Allowed: ${methods}`, type: 'method_not_allowed' }],
      { Allow: methods },
    );
  for (const { path } of INGEST_ROUTES) app.all(path, allow('POST'));
  for (const path of HEALTH_ROUTES) app.all(path, allow('GET, HEAD'));

  app.notFound((c) =>
    problem(c, 404, `No endpoint at ${c.req.path.slice(0, 200)}`, [{ loc: ['path'], msg: 'Not found', type: 'not_found' }]),
  );
  app.onError((error, c) => {
    deps.logger.error({ event: 'request_failed', err: error, method: c.req.method, path: c.req.path }, 'request failed');
    return problem(c, 500, 'Internal server error', []);
  });
  return app;
}
