import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import type { QueueWriter } from '../../queue/queue-writer.js';
import { QueueRefusedError, type QueueRefusal } from '../../queue/queue-errors.js';
import { encodeRecord } from '../../queue/record-codec.js';
import { parseBatch, parseSingle, type ParseResult, type Validator } from '../../reading/parse-readings.js';
import { toReadingIssues } from '../../reading/reading-issues.js';
import type { Reading } from '../../reading/reading-schema.js';
import type { ReceiveClock } from '../../reading/receive-clock.js';
import { uplinkToReadings } from '../../reading/ttn-uplink.js';
import { parseGpsFixes } from '../../reading/gps-fix.js';
import type { KeyCounterTable } from '../../keys/key-counters.js';
import { foreignShips } from '../../keys/ship-prefix.js';
import { siteOfRequest } from '../../keys/site-binding.js';
import { SITE_HEADER } from '../../reading/site-id.js';
import type { GatewayStats } from '../../stats.js';
import { readJsonBody } from '../body.js';
import type { InflightBudget } from '../inflight-budget.js';
import { principalOf } from '../middleware/api-key/index.js';
import { problem } from '../problem-details.js';

export interface IngestDeps {
  queue: QueueWriter;
  delivery: { notifyAppended(): void };
  clock: ReceiveClock;
  stats: GatewayStats;
  validator: Validator;
  maxBodyBytes: number;
  maxBatchReadings: number;
  inflight: InflightBudget;
  harborId: string | undefined;
  /** This gateway's site: readings of it are queued without a site of their own. */
  siteId: string;
  /** What a full queue's 503 says: the sink that holds it. */
  fullReason: { message(): string };
  isStopping: () => boolean;
  logger: Logger;
  keys: { counters: KeyCounterTable };
}

type Kind = 'single' | 'batch' | 'ttn' | 'gps';

/** Path segments that name an endpoint and so can never be a harbor id. */
const RESERVED = new Set(['batch', 'ingest', 'ttn', 'gps']);

/** Every ingest path: the self-hosted ones, then the hosted forms that carry a harbor id. */
export const INGEST_ROUTES: readonly { path: string; kind: Kind }[] = [
  { path: '/api/v2/ingest', kind: 'single' },
  { path: '/api/v2/ingest/batch', kind: 'batch' },
  { path: '/api/v2/ingest/ttn', kind: 'ttn' },
  { path: '/api/v2/ingest/gps', kind: 'gps' },
  { path: '/api/v2/ingest/ingest/:harbor', kind: 'single' },
  { path: '/api/v2/ingest/ingest/:harbor/batch', kind: 'batch' },
  { path: '/api/v2/ingest/ingest/:harbor/ttn', kind: 'ttn' },
  { path: '/api/v2/ingest/ingest/:harbor/gps', kind: 'gps' },
  { path: '/api/v2/ingest/:harbor', kind: 'single' },
  { path: '/api/v2/ingest/:harbor/batch', kind: 'batch' },
  { path: '/api/v2/ingest/:harbor/ttn', kind: 'ttn' },
  { path: '/api/v2/ingest/:harbor/gps', kind: 'gps' },
  { path: '/api/v1/ingest/ingest/:harbor', kind: 'single' },
  { path: '/api/v1/ingest/ingest/:harbor/batch', kind: 'batch' },
  { path: '/api/v1/ingest/ingest/:harbor/ttn', kind: 'ttn' },
  { path: '/api/v1/ingest/ingest/:harbor/gps', kind: 'gps' },
];

/** Not a reading or batch at all is a bad request; readings the schema refuses are unprocessable. */
const REFUSAL_STATUS = { malformed: 400, invalid: 422 } as const;

const RETRY_AFTER_S: Record<QueueRefusal, number> = { full: 30, disk_full: 60, io_error: 10, closed: 5 };

export function registerIngestRoutes(app: Hono, deps: IngestDeps, requireApiKey: MiddlewareHandler): void {
  for (const route of INGEST_ROUTES) app.post(route.path, requireApiKey, (c) => ingest(c, route.kind, deps));
}

async function ingest(c: Context, kind: Kind, deps: IngestDeps): Promise<Response> {
  const harbor = c.req.param('harbor');
  if (harbor !== undefined && (RESERVED.has(harbor) || (deps.harborId !== undefined && harbor !== deps.harborId))) {
    return problem(c, 404, 'Unknown harbor', [
      { loc: ['path', 'harbor_id'], msg: `No harbor ${JSON.stringify(harbor)} on this gateway`, type: 'not_found' },
    ]);
  }
  // Refuse before reading the body when the answer cannot be yes.
  const origin = siteOfRequest(principalOf(c), c.req.header(SITE_HEADER), deps.siteId);
  if (!origin.ok) return problem(c, origin.status, origin.message, origin.details);
  if (deps.isStopping()) return unavailable(c, new QueueRefusedError('closed', 'The gateway is stopping; retry shortly'));
  if (deps.queue.isFull()) return unavailable(c, new QueueRefusedError('full', deps.fullReason.message()));

  // Declared lengths over the limit are refused by readJsonBody; reserve what will be read.
  const declared = Number(c.req.header('content-length') ?? deps.maxBodyBytes);
  const reserved = Math.min(Number.isFinite(declared) ? declared : deps.maxBodyBytes, deps.maxBodyBytes);
  if (!deps.inflight.tryReserve(reserved)) {
    return problem(
      c,
      503,
      'The gateway is busy with other requests; retry shortly',
      [{ loc: ['body'], msg: 'Too many request bytes in flight', type: 'busy' }],
      {
        'Retry-After': '1',
        Connection: 'close',
      },
    );
  }
  let parsed: ParseResult;
  try {
    const body = await readJsonBody(c, deps.maxBodyBytes);
    if (!body.ok) return problem(c, body.status, body.message, body.details, body.status === 413 ? { Connection: 'close' } : undefined);
    parsed = parse(body.json, kind, deps);
  } finally {
    deps.inflight.release(reserved);
  }
  if (!parsed.ok) return problem(c, REFUSAL_STATUS[parsed.refusal], parsed.message, parsed.details);
  const principal = principalOf(c);
  // The Things Network counts any non-2xx as a failed delivery, so a message without numbers is fine.
  if (parsed.readings.length === 0) {
    deps.stats.acceptedRequests += 1;
    if (principal !== undefined) deps.keys.counters.accepted(principal.name, 0);
    return c.json({ status: 'No numeric data extracted', count: 0 });
  }

  const foreign =
    principal === undefined
      ? undefined
      : foreignShips(
          principal,
          parsed.readings,
          (i) => parsed.shipLocs?.[i] ?? (kind === 'single' ? ['body', 'ship_id'] : ['body', i, 'ship_id']),
        );
  if (foreign !== undefined) return problem(c, 403, foreign.message, foreign.details);

  const stored = await store(c, parsed.readings, origin.site, deps);
  if (stored !== undefined) return stored;
  if (principal !== undefined) deps.keys.counters.accepted(principal.name, parsed.readings.length);
  if (kind === 'single') {
    const reading = parsed.readings[0]!;
    return c.json({ status: 'Data received and queued', ship_id: reading.shipId, cargo_id: reading.cargoId });
  }
  const status =
    kind === 'batch' ? 'Batch data received and queued' : kind === 'gps' ? 'GPS data received and queued' : 'Uplink received and queued';
  return c.json({ status, count: parsed.readings.length });
}

function parse(json: unknown, kind: Kind, deps: IngestDeps): ParseResult {
  if (kind === 'single') return parseSingle(json, deps.validator);
  if (kind === 'batch') return parseBatch(json, deps.validator, deps.maxBatchReadings);
  if (kind === 'gps') return parseGpsFixes(json, deps.validator, deps.maxBatchReadings, deps.clock);
  const uplink = uplinkToReadings(json);
  if (!uplink.ok) {
    return {
      ok: false,
      refusal: 'invalid',
      message: 'Body is not a The Things Network webhook message',
      details: toReadingIssues(uplink.issues, ['body']),
    };
  }
  if (uplink.readings.length === 0) return { ok: true, readings: [] };
  const result = parseBatch(uplink.readings, deps.validator, deps.maxBatchReadings);
  return result.ok ? { ...result, shipLocs: uplink.readings.map(() => uplink.shipLoc) } : result;
}

/** Commits the readings of `site` (undefined: this gateway's) as one queue record; undefined on success, else the refusal to send. */
async function store(c: Context, readings: Reading[], site: string | undefined, deps: IngestDeps): Promise<Response | undefined> {
  try {
    await deps.queue.append(encodeRecord(readings, deps.clock), readings.length, Date.now(), site);
  } catch (error) {
    if (error instanceof QueueRefusedError) {
      if (error.refusal === 'full') return unavailable(c, new QueueRefusedError('full', deps.fullReason.message()));
      if (error.refusal !== 'closed')
        deps.logger.error({ event: 'queue_write_failed', refusal: error.refusal, err: error.cause }, error.message);
      return unavailable(c, error);
    }
    throw error;
  }
  deps.stats.acceptedRequests += 1;
  deps.stats.acceptedReadings += readings.length;
  deps.delivery.notifyAppended();
  return undefined;
}

function unavailable(c: Context, error: QueueRefusedError): Response {
  const seconds = RETRY_AFTER_S[error.refusal];
  return problem(c, 503, error.message, [{ loc: ['queue'], msg: error.message, type: `queue_${error.refusal}` }], {
    'Retry-After': String(seconds),
  });
}
