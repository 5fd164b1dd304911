import type { Socket } from 'node:net';
import { Hono, type Context } from 'hono';
import { TrieRouter } from 'hono/router/trie-router';
import type { Logger } from 'pino';
import type { Validator } from '../reading/parse-readings.js';
import type { ReceiveClock } from '../reading/receive-clock.js';
import type { Principal } from '../keys/key-store.js';
import { QueueFullReason } from '../health/queue-full.js';
import { apiKey } from './middleware/api-key/index.js';
import { InflightBudget } from './inflight-budget.js';
import type { IdempotencyKeys } from './idempotency-keys.js';
import { problem } from './problem-details.js';
import { StaticPathRouter } from './static-path-router.js';
import { HEALTH_ROUTES, registerHealthRoutes, type HealthDeps } from './routes/health.js';
import { INGEST_ROUTES, registerIngestRoutes } from './routes/ingest.js';
import { FLEET_REPORT_PATH, registerFleetRoutes, type FleetDeps } from './routes/fleet.js';
import type { ClaimChecker } from './site-claim-refusal.js';

/** What the app needs: what the health routes need (their API-key check it makes itself), and more. */
export interface AppDeps extends Omit<HealthDeps, 'requireApiKey'> {
  clock: ReceiveClock;
  validator: Validator;
  logger: Logger;
  maxBodyBytes: number;
  maxInflightBytes: number;
  /** Request bytes held at once; shared with MQTT's packets when given. */
  inflight?: InflightBudget;
  maxBatchReadings: number;
  harborId: string | undefined;
  /** This gateway's site (`SITE_ID`). */
  siteId: string;
  /** Aborted when the gateway starts to stop. */
  stopping: AbortSignal;
  /** The local console and `/metrics` (src/console/): mounted ahead of the API, told what ingest accepted and refused. */
  console?: ConsoleHooks;
  /** Requests with an `Idempotency-Key` answered so far (`routes/ingest.ts`). */
  idempotency: IdempotencyKeys;
  /** Told of each request that showed a valid device key (the connection gate): its connection is a device's. */
  gate?: { prove(socket: Socket): void };
  /** Stores the health reports site gateways send (POST /api/v2/fleet/report); undefined without a QuestDB. */
  recordFleetReport?: FleetDeps['recordFleetReport'];
  /** Which gateway instance owns each site forwarded here (claims/site-claims.ts). */
  claims?: ClaimChecker;
}

export interface ConsoleHooks {
  mount(app: Hono): void;
  /** A queue record of `readings` readings committed for a key: called on the request, so it must stay cheap. */
  accepted(principal: Principal, record: string, readings: number, values?: Float64Array): void;
  /** A request answered with an error, after its answer was made. */
  refused(c: Context): void;
}

const socketOf = (c: Context): Socket | undefined => (c.env as { incoming?: { socket?: Socket } } | undefined)?.incoming?.socket;

/** The peer address of the connection; proxies are not trusted, so forwarding headers are ignored. */
const clientAddress = (c: Context): string => socketOf(c)?.remoteAddress ?? 'unknown';

/** The HTTP API: ingest paths behind the API key, health and status, JSON errors for everything else. */
export function createApp(deps: AppDeps): Hono {
  // strict: false matches every path with and without a trailing slash, as existing clients use both.
  // The trie is the router Hono would choose itself (its RegExpRouter cannot hold both
  // /api/v2/ingest/:harbor and /api/v2/ingest/ingest/:harbor); the wrapper spares the ingest
  // endpoints' search on every request.
  const app = new Hono({ strict: false, router: new StaticPathRouter(new TrieRouter()) });
  const requireApiKey = apiKey({
    keys: deps.keys,
    delay: deps.failureDelay,
    clientAddress,
    stopping: deps.stopping,
    logger: deps.logger,
    proven: (c) => {
      const socket = socketOf(c);
      if (socket !== undefined) deps.gate?.prove(socket);
    },
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

  const fullReason = new QueueFullReason(deps.queue, deps.stats, deps.sinks ?? []);
  registerIngestRoutes(app, { ...deps, inflight: deps.inflight ?? new InflightBudget(deps.maxInflightBytes), fullReason }, requireApiKey);
  registerHealthRoutes(app, { ...deps, requireApiKey });
  registerFleetRoutes(
    app,
    { recordFleetReport: deps.recordFleetReport, siteId: deps.siteId, ...(deps.claims === undefined ? {} : { claims: deps.claims }) },
    requireApiKey,
  );

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
  app.all(FLEET_REPORT_PATH, allow('POST'));

  app.notFound((c) =>
    problem(c, 404, `No endpoint at ${c.req.path.slice(0, 200)}`, [{ loc: ['path'], msg: 'Not found', type: 'not_found' }]),
  );
  app.onError((error, c) => {
    deps.logger.error({ event: 'request_failed', err: error, method: c.req.method, path: c.req.path }, 'request failed');
    return problem(c, 500, 'Internal server error', []);
  });
  return app;
}
