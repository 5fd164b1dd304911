import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import { isOwnRecord, type DeadLetterInput, type QueueRecord } from '../../queue/queue-reader.js';
import { INSTANCE_HEADER, SITE_HEADER, encodeSite } from '../../reading/site-id.js';
import type { Delivery, SinkTarget } from '../sink.js';
import { readingLetter, reasonText } from '../dead-letter-reason.js';
import { outgoingReadings, type OutgoingReading } from '../outgoing-readings.js';
import { classifyAnswer, type Answer, type AnswerInput } from './answer.js';
import { chunkReadings } from './batch-json.js';
import { upstreamDispatcher } from './dispatcher.js';
import { type EncodedBatch, UpstreamLink, type UpstreamCompression } from './upstream-link.js';

export interface UpstreamTargetOptions {
  /** The destination's batch endpoint, whole. */
  url: string;
  apiKey: string;
  caFile: string | undefined;
  proxy: string | undefined;
  timeoutMs: number;
  /** Most readings and body bytes in one request. */
  maxReadings: number;
  maxBodyBytes: number;
  /** This gateway's site, named in `X-Harbor-Site` for readings queued without a site of their own. */
  site: string;
  /** This gateway's instance, sent in `X-Harbor-Instance` with its own readings (not with other sites' it relays). */
  instance?: string;
  /** The coding batches go in once the upstream takes it (upstream-link.ts); default gzip. */
  compression?: UpstreamCompression;
}

/** An answer body is read up to this much: enough for any refusal's details, bounded against a hostile peer. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** Readings in the first request of a run while the link does not know what the upstream takes. */
export const ASKING_READINGS = 10;

/**
 * Forwards batches to another ingest API (the hosted service, a self-hosted stack, another gateway)
 * as the API's batch JSON, in queue order, each reading with its stored time. A request too large
 * for the destination is halved; readings it refuses for their content become dead letters with
 * its status and answer; a wrong key or URL fails every delivery until the operator fixes it.
 */

export class UpstreamTarget implements SinkTarget {
  readonly name = 'upstream';
  readonly describe: string;
  readonly #options: UpstreamTargetOptions;
  /** Made at the first delivery: a CA file that cannot be read fails deliveries, not the delivery thread. */
  #dispatcher: Dispatcher | undefined;
  readonly #log: Logger;
  /** Lowered when the destination says a request was too large, so later batches start small enough. */
  #maxReadings: number;
  /** The forms batches go in, as the upstream's answers told. */
  readonly #link: UpstreamLink;

  constructor(options: UpstreamTargetOptions, logger: Logger, dispatcher?: Dispatcher) {
    this.#options = options;
    this.#dispatcher = dispatcher;
    this.#log = logger;
    this.#maxReadings = options.maxReadings;
    this.#link = new UpstreamLink(options.compression ?? 'gzip', logger);
    this.describe = describeUpstream(options.url, options.proxy);
  }

  async deliver(records: readonly QueueRecord[]): Promise<Delivery> {
    const deadLetters: DeadLetterInput[] = [];
    const readings = outgoingReadings(records, deadLetters);
    const pending = chunkReadings(readings, this.#maxReadings, this.#options.maxBodyBytes, this.#originOf);
    // A backlog after a start goes compressed from its second request on, not from the next delivery.
    const first = pending[0];
    if (this.#link.asking && first !== undefined && first.length > ASKING_READINGS)
      pending.splice(0, 1, first.slice(0, ASKING_READINGS), first.slice(ASKING_READINGS));
    let requests = 0;
    for (let chunk = pending.shift(); chunk !== undefined; chunk = pending.shift()) {
      const answer = await this.#post(chunk);
      requests += 1;
      switch (answer.kind) {
        case 'delivered':
          break;
        case 'retry':
          return answer.retryAfterMs === undefined
            ? { ok: false, message: answer.message, level: 'warn' }
            : { ok: false, message: answer.message, retryAfterMs: answer.retryAfterMs, level: 'warn' };
        case 'operator':
          return { ok: false, message: answer.message, level: 'error' };
        case 'too_large':
          if (chunk.length === 1) {
            deadLetters.push(deadLetter(chunk[0]!, answer.reason));
          } else {
            const half = Math.ceil(chunk.length / 2);
            this.#lowerMaxReadings(half, answer.message);
            pending.unshift(chunk.slice(0, half), chunk.slice(half));
          }
          break;
        case 'refused_readings': {
          const refused = new Set(answer.refused.map((r) => r.index));
          for (const { index, reason } of answer.refused) deadLetters.push(deadLetter(chunk[index]!, reason));
          const rest = chunk.filter((_, i) => !refused.has(i));
          if (rest.length > 0) pending.unshift(rest);
          break;
        }
        case 'refused':
          for (const r of chunk) deadLetters.push(deadLetter(r, answer.reason));
          break;
        case 'claimed': {
          const site = this.#siteOf(chunk[0]!.record);
          // Its current name: held, queued, until renamed or released. A name it had before
          // cannot be renamed any more: those readings are set aside, to re-queue once released.
          if (site === this.#options.site) return { ok: false, message: heldMessage(site, answer.message), level: 'error' };
          const reason = `${answer.message} (answered as ${JSON.stringify(site)} before this gateway was renamed; re-queue once the claim is released at the centre)`;
          for (const r of chunk) deadLetters.push(deadLetter(r, reason));
          break;
        }
      }
    }
    return { ok: true, requests, deadLetters };
  }

  async close(): Promise<void> {
    await this.#dispatcher?.close();
  }

  /** The site a record's readings go under. */
  #siteOf(record: QueueRecord): string {
    return record.site ?? this.#options.site;
  }

  /** What a request is sent as: its site, and whether it is this gateway's own (sent with its instance). */
  readonly #originOf = (r: OutgoingReading): string => `${isOwnRecord(r.record) ? 'own' : 'relayed'}\n${this.#siteOf(r.record)}`;

  async #post(chunk: readonly OutgoingReading[]): Promise<Answer> {
    const timeoutMs = this.#options.timeoutMs;
    try {
      this.#dispatcher ??= upstreamDispatcher(this.#options);
    } catch (error) {
      return { kind: 'operator', message: `cannot set up the upstream connection: ${reasonText((error as Error).message)}` };
    }
    let batch: EncodedBatch;
    let answer: AnswerInput;
    try {
      for (;;) {
        batch = await this.#link.encode(chunk);
        const response = await this.#dispatcher.request({
          ...target(this.#options.url),
          method: 'POST',
          headers: { ...this.#headers(chunk[0]!.record), ...batch.headers },
          body: batch.body,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          signal: AbortSignal.timeout(timeoutMs),
        });
        answer = {
          status: response.statusCode,
          retryAfter: header(response.headers['retry-after']),
          location: header(response.headers['location']),
          body: await readBounded(response.body),
        };
        this.#link.learn({
          acceptEncoding: header(response.headers['accept-encoding']),
          acceptPost: header(response.headers['accept-post']),
        });
        if (answer.status !== 415 || !this.#link.refused(batch, reasonText(answer.body))) break;
      }
    } catch (error) {
      return networkAnswer(error, timeoutMs);
    }
    return inChunkOrder(classifyAnswer(answer, chunk.length), batch.order);
  }

  /**
   * The body stays exactly the API's (the hosted service's among them); the site rides beside it,
   * and for this gateway's own readings its instance.
   */
  #headers(record: QueueRecord): Record<string, string> {
    const headers: Record<string, string> = {
      'x-api-key': this.#options.apiKey,
      [SITE_HEADER]: encodeSite(this.#siteOf(record)),
    };
    if (this.#options.instance !== undefined && isOwnRecord(record)) headers[INSTANCE_HEADER] = this.#options.instance;
    return headers;
  }

  #lowerMaxReadings(readings: number, message: string): void {
    if (readings >= this.#maxReadings) return;
    this.#maxReadings = readings;
    this.#log.warn(
      { event: 'upstream_batch_lowered', sink: this.name, maxReadings: readings, answer: message },
      'the upstream refused a request as too large; sending smaller ones',
    );
  }
}

/** The destination for logs and /status: its URL, and the proxy when there is one. */
export const describeUpstream = (url: string, proxy: string | undefined): string =>
  proxy === undefined ? url : `${url} via proxy ${proxy}`;

const deadLetter = (r: OutgoingReading, reason: string): DeadLetterInput => readingLetter(r.record, r.reading, reason);

/** An answer's reading indices, which count in the body's order, as indices into the chunk. */
function inChunkOrder(answer: Answer, order: readonly number[] | undefined): Answer {
  if (order === undefined || answer.kind !== 'refused_readings') return answer;
  const refused = answer.refused.map((r) => ({ ...r, index: order[r.index]! })).sort((a, b) => a.index - b.index);
  return { ...answer, refused };
}

/** A delivery the centre refuses for the site: what the operator reads in `lastError`, and the state words find (health/gateway-state.ts). */
const heldMessage = (site: string, centre: string): string =>
  `the centre gives site ${JSON.stringify(site)} to another gateway; readings of this site stay queued until this gateway is renamed (SITE_ID) or the claim is released at the centre: ${centre}`;

/** undici wants the origin and the path apart; the query stays with the path. */
function target(url: string): { origin: string; path: string } {
  const parsed = new URL(url);
  return { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
}

const header = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

async function readBounded(body: Dispatcher.ResponseData['body']): Promise<string> {
  const parts: Buffer[] = [];
  let bytes = 0;
  for await (const part of body) {
    const buffer = part as Buffer;
    parts.push(buffer);
    bytes += buffer.length;
    if (bytes >= MAX_ANSWER_BYTES) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(parts).subarray(0, MAX_ANSWER_BYTES).toString('utf8');
}

/** Certificate checks that fail until the operator sets the right CA (or the destination fixes its certificate). */
const CERTIFICATE_ERRORS = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** A request that got no answer: a passing outage, unless the destination's certificate is not trusted. */
function networkAnswer(error: unknown, timeoutMs: number): Answer {
  const e = error as { code?: string; name?: string; message?: string; cause?: { code?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT') {
    return { kind: 'retry', message: `upstream did not answer within ${timeoutMs} ms` };
  }
  const code = e.code ?? e.cause?.code;
  const text = reasonText(e.message ?? String(error));
  const message = `upstream unreachable: ${text}${code !== undefined && !text.includes(code) ? ` (${code})` : ''}`;
  if (code !== undefined && CERTIFICATE_ERRORS.has(code)) {
    return { kind: 'operator', message: `${message}; set UPSTREAM_CA_FILE to the CA the upstream's certificate chains to` };
  }
  return { kind: 'retry', message };
}
