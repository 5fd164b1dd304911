import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import { createHash } from 'node:crypto';
import type { QueueWriter, RequestConnection } from '../../queue/queue-writer.js';
import { QueueRefusedError, RequestAbandonedError, type QueueRefusal } from '../../queue/queue-errors.js';
import { encodeRecord } from '../../queue/record-codec.js';
import { parseBatch, parseSingle, type ParseResult, type Validator } from '../../reading/parse-readings.js';
import { toReadingIssues, type ReadingIssue } from '../../reading/reading-issues.js';
import type { Reading } from '../../reading/reading-schema.js';
import type { ReceiveClock } from '../../reading/receive-clock.js';
import { uplinkToReadings } from '../../reading/ttn-uplink.js';
import { parseGpsFixes } from '../../reading/gps-fix.js';
import type { KeyCounterTable } from '../../keys/key-counters.js';
import type { Principal } from '../../keys/key-store.js';
import { foreignShips } from '../../keys/ship-prefix.js';
import { siteOfRequest } from '../../keys/site-binding.js';
import { INSTANCE_HEADER, SITE_HEADER } from '../../reading/site-id.js';
import type { GatewayStats } from '../../stats.js';
import { bodyReservation, readJsonBody } from '../body.js';
import { advertiseForwardingForms } from '../forwarding-forms.js';
import { parseSeriesBatch } from '../../reading/series-batch.js';
import { isSeriesMediaType } from '../../reading/series-form.js';
import type { InflightBudget } from '../inflight-budget.js';
import { principalOf } from '../middleware/api-key/index.js';
import { parseIdempotencyKey, type IdempotencyKeys } from '../idempotency-keys.js';
import { problem } from '../problem-details.js';
import { clockSynchronized } from '../../health/clock.js';
import { type ClaimChecker, siteClaimRefusal } from '../site-claim-refusal.js';

export interface IngestDeps {
  queue: QueueWriter;
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
  console?: { accepted(principal: Principal, record: string, readings: number, values?: Float64Array): void };
  idempotency: IdempotencyKeys;
  /** Which gateway instance owns each site it is forwarded (a centre's site claims); undefined: none kept. */
  claims?: ClaimChecker;
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
  const siteHeader = c.req.header(SITE_HEADER);
  const origin = siteOfRequest(principalOf(c), siteHeader, deps.siteId);
  if (!origin.ok) return problem(c, origin.status, origin.message, origin.details);
  if (siteHeader !== undefined) advertiseForwardingForms(c);
  // A gateway forwarding names its site and its instance: a device's request pays no second look-up.
  const instance = siteHeader === undefined || deps.claims === undefined ? undefined : c.req.header(INSTANCE_HEADER);
  if (instance !== undefined) {
    const refusal = siteClaimRefusal(c, deps.claims!, origin.site ?? deps.siteId, instance);
    if (refusal !== undefined) return refusal;
  }
  if (deps.isStopping()) return unavailable(c, new QueueRefusedError('closed', 'The gateway is stopping; retry shortly'));
  if (deps.queue.isFull()) return unavailable(c, new QueueRefusedError('full', deps.fullReason.message()));

  // Declared lengths over the limit are refused by readJsonBody; reserve what will be read.
  const reserved = bodyReservation(c, deps.maxBodyBytes);
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
    if (!body.ok) return problem(c, body.status, body.message, body.details, body.status === 413 ? { Connection: 'close' } : body.headers);
    // A plain batch is an array: only another body pays for a look at its Content-Type.
    const series = kind === 'batch' && !Array.isArray(body.json) && isSeriesMediaType(c.req.header('content-type'));
    parsed = series ? parseSeriesBatch(body.json, deps.validator, deps.maxBatchReadings) : parse(body.json, kind, deps);
  } finally {
    deps.inflight.release(reserved);
  }
  if (!parsed.ok) return refused(c, parsed);
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

  // The one header lookup a request without a key pays.
  const idempotencyKey = c.req.header('idempotency-key');
  const fingerprinted = idempotencyKey === undefined ? undefined : fingerprint(kind, parsed.readings);
  // Encoded now, before the commit's wait of a turn of the event loop or more: what waits is one
  // string, while the parsed readings die young. Kept through the wait, a batch's thousands of
  // small objects were copied by minor garbage collections and then promoted, which doubled the
  // collector's share of a busy ingest thread. So nothing after this line holds `parsed`.
  const encoded = encode(kind, parsed.readings, deps.clock, principal !== undefined && deps.console !== undefined);
  if (idempotencyKey !== undefined) return storeOnce(c, encoded, fingerprinted!, principal, origin.site, idempotencyKey, deps);
  return storeAndAnswer(c, encoded, principal, origin.site, deps);
}

/**
 * A request's readings as their queue record, and the body of the answer once it is committed;
 * for the console's table, a batch's values too, so that it need not parse them back from the record.
 */
interface Encoded {
  record: string;
  readings: number;
  values: Float64Array | undefined;
  answer: object;
}

function encode(kind: Kind, readings: readonly Reading[], clock: ReceiveClock, forConsole: boolean): Encoded {
  const record = encodeRecord(readings, clock);
  if (kind === 'single') {
    const reading = readings[0]!;
    return {
      record,
      readings: 1,
      values: undefined,
      answer: { status: 'Data received and queued', ship_id: reading.shipId, cargo_id: reading.cargoId },
    };
  }
  const status =
    kind === 'batch' ? 'Batch data received and queued' : kind === 'gps' ? 'GPS data received and queued' : 'Uplink received and queued';
  return {
    record,
    readings: readings.length,
    values: forConsole ? valuesOf(readings) : undefined,
    answer: { status, count: readings.length },
  };
}

function valuesOf(readings: readonly Reading[]): Float64Array {
  const values = new Float64Array(readings.length);
  for (let i = 0; i < readings.length; i++) values[i] = readings[i]!.value;
  return values;
}

async function storeAndAnswer(
  c: Context,
  encoded: Encoded,
  principal: Principal | undefined,
  site: string | undefined,
  deps: IngestDeps,
): Promise<Response> {
  const stored = await storeAndCount(c, encoded, principal, site, deps);
  return stored instanceof Response ? stored : c.json(stored);
}

/** Commits the record and counts its readings for their key: the body of the 200 answer, or the refusal. */
async function storeAndCount(
  c: Context,
  encoded: Encoded,
  principal: Principal | undefined,
  site: string | undefined,
  deps: IngestDeps,
): Promise<Response | object> {
  const refused = await store(c, encoded, site, deps);
  if (refused !== undefined) return refused;
  if (principal !== undefined) {
    deps.keys.counters.accepted(principal.name, encoded.readings);
    deps.console?.accepted(principal, encoded.record, encoded.readings, encoded.values);
  }
  return encoded.answer;
}

/**
 * A request with an `Idempotency-Key`: stored once per device key and key within the window; a
 * repetition (the same endpoint, readings and site) gets the first answer again (with
 * `Idempotent-Replayed: true`) and stores nothing.
 */
async function storeOnce(
  c: Context,
  encoded: Encoded,
  fingerprinted: string,
  principal: Principal | undefined,
  site: string | undefined,
  header: string,
  deps: IngestDeps,
): Promise<Response> {
  const key = parseIdempotencyKey(header);
  if (key === undefined) {
    return problem(c, 400, 'Idempotency-Key must be 1 to 255 visible ASCII characters', [
      { loc: ['header', 'Idempotency-Key'], msg: 'Use 1 to 255 visible ASCII characters, e.g. a UUID', type: 'idempotency_key_invalid' },
    ]);
  }
  const claim = await deps.idempotency.claim(principal?.name ?? '', key, fingerprinted, site ?? null);
  if (claim.kind === 'mismatch') {
    return problem(c, 422, 'Idempotency-Key was already used for a different request', [
      { loc: ['header', 'Idempotency-Key'], msg: 'A new request needs a new key', type: 'idempotency_key_reused' },
    ]);
  }
  if (claim.kind === 'repeat') {
    return c.json(claim.answer.body as object, claim.answer.status as 200, { 'Idempotent-Replayed': 'true' });
  }
  let stored: Response | object;
  try {
    stored = await storeAndCount(c, encoded, principal, site, deps);
  } catch (error) {
    claim.failed();
    throw error;
  }
  if (stored instanceof Response) {
    claim.failed();
    return stored;
  }
  claim.answered({ status: 200, body: stored });
  return c.json(stored);
}

/** What a keyed request asks to store: its endpoint and readings, receive times aside. */
function fingerprint(kind: Kind, readings: readonly Reading[]): string {
  const hash = createHash('sha256').update(kind);
  for (const r of readings) hash.update(`\n${r.timeNs ?? ''}\t${r.shipId}\t${r.cargoId}\t${Object.is(r.value, -0) ? '-0' : r.value}`);
  return hash.digest('base64');
}

const WINDOW_PROBLEMS = new Set(['datetime_past', 'datetime_future']);

/**
 * A reading outside the time window is the device's clock at fault, unless the gateway's own clock
 * is not synchronised: then the gateway cannot tell, and asks the device to retry (503) rather than
 * refuse for good what a synchronised clock may accept. Undefined: refuse as the parser said.
 */
export function unsynchronisedClockRefusal(
  details: readonly ReadingIssue[],
  synchronized: () => boolean | null,
): { message: string; details: ReadingIssue[] } | undefined {
  if (details.length === 0 || !details.every((d) => WINDOW_PROBLEMS.has(d.type))) return undefined;
  // Read only here, on such a refusal: it is a file system look-up.
  if (synchronized() !== false) return undefined;
  return {
    message: "The gateway's clock is not synchronised yet, so it cannot judge these reading times; retry shortly",
    details: details.map((d) => ({ ...d, type: 'clock_unsynchronised' })),
  };
}

function refused(c: Context, parsed: ParseResult & { ok: false }): Response {
  const unsynchronised = unsynchronisedClockRefusal(parsed.details, clockSynchronized);
  if (unsynchronised !== undefined) {
    return problem(c, 503, unsynchronised.message, unsynchronised.details, { 'Retry-After': '30' });
  }
  return problem(c, REFUSAL_STATUS[parsed.refusal], parsed.message, parsed.details);
}

function parse(json: unknown, kind: Kind, deps: IngestDeps): ParseResult {
  if (kind === 'single') return parseSingle(json, deps.validator);
  if (kind === 'batch') return parseBatch(json, deps.validator, deps.maxBatchReadings);
  if (kind === 'gps') return parseGpsFixes(json, deps.validator, deps.maxBatchReadings, deps.clock);
  const uplink = uplinkToReadings(json, deps.validator.limits.window);
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

/** Commits the record of `site` (undefined: this gateway's); undefined on success, else the refusal to send. */
async function store(c: Context, encoded: Encoded, site: string | undefined, deps: IngestDeps): Promise<Response | undefined> {
  try {
    // Received at the clock's newest millisecond: at a restart the queue's newest one is where it starts.
    await deps.queue.append(encoded.record, encoded.readings, deps.clock.receivedMs(), connectionOf(c), site);
  } catch (error) {
    if (error instanceof RequestAbandonedError) {
      deps.stats.abandonedRequests += 1;
      deps.logger.info(
        { event: 'request_abandoned', readings: encoded.readings },
        'the client closed the connection before the commit; nothing of the request is stored',
      );
      // Nobody reads it; 499 is the status proxies log for a request its client closed.
      return c.body(null, 499 as 400);
    }
    if (error instanceof QueueRefusedError) {
      if (error.refusal === 'full') return unavailable(c, new QueueRefusedError('full', deps.fullReason.message()));
      if (error.refusal !== 'closed')
        deps.logger.error({ event: 'queue_write_failed', refusal: error.refusal, err: error.cause }, error.message);
      return unavailable(c, error);
    }
    throw error;
  }
  deps.stats.acceptedRequests += 1;
  deps.stats.acceptedReadings += encoded.readings;
  return undefined;
}

/** The request's connection (plain or TLS socket), which is destroyed once its client closed it. */
const connectionOf = (c: Context): RequestConnection | undefined =>
  (c.env as { incoming?: { socket?: RequestConnection } } | undefined)?.incoming?.socket;

function unavailable(c: Context, error: QueueRefusedError): Response {
  const seconds = RETRY_AFTER_S[error.refusal];
  return problem(c, 503, error.message, [{ loc: ['queue'], msg: error.message, type: `queue_${error.refusal}` }], {
    'Retry-After': String(seconds),
  });
}
