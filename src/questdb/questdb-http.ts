import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { Pool } from './undici-dispatchers.js';

const gzipBody = promisify(gzip);
/** The first QuestDB release whose ILP/HTTP endpoint reads `Content-Encoding: gzip`; older ones read the bytes as ILP text. */
const GZIP_SINCE: readonly [number, number] = [9, 1];

export interface QuestDbOptions {
  url: string;
  /** Longest wait for one answer, writes and SQL alike. */
  timeoutMs: number;
  /** HTTP basic authentication, as open-source QuestDB takes it. */
  username: string | undefined;
  password: string | undefined;
  /** A bearer token (`Authorization: Bearer`), as QuestDB Enterprise takes it; sent instead of basic authentication. */
  token?: string | undefined;
  /**
   * PEM certificates an https:// QuestDB's certificate must chain to, instead of the authorities
   * Node trusts by default (Mozilla's list, plus `NODE_EXTRA_CA_CERTS`).
   */
  ca?: string | undefined;
  /**
   * `gzip`: ILP bodies go gzip-compressed once `SELECT build()` told a QuestDB that reads them
   * (9.1 and later); until then, and to an older one, plain. `onCompression` hears what was found.
   */
  compression?: 'gzip' | 'off' | undefined;
  onCompression?: ((gzip: boolean, build: string) => void) | undefined;
}

/** `error`: an operator has to fix it (refused credentials, a certificate that does not verify); `warn`: it may pass. */
export type FailureLevel = 'warn' | 'error';

/** The outcome of one ILP/HTTP write. QuestDB applies a request all or nothing. */
export type WriteOutcome =
  | { ok: true }
  /** QuestDB refused a line for its content; `line` is 1-based within the request. */
  | { ok: false; kind: 'rejected'; line: number; message: string }
  /**
   * Nothing was written: network, timeout, 5xx, a table problem, refused credentials or TLS.
   * `retryAfterMs` when a 429 or 503 asked for a pause (a proxy in front of QuestDB may).
   */
  | { ok: false; kind: 'failed'; message: string; level: FailureLevel; retryAfterMs?: number };

export class QuestDbError extends Error {
  override name = 'QuestDbError';
  constructor(
    message: string,
    readonly level: FailureLevel = 'warn',
    /** The HTTP status QuestDB answered with; undefined when it did not answer. */
    readonly status?: number,
  ) {
    super(message);
  }
}

// Errors about the table rather than the row: retried after the table is set up again, never dead-lettered.
const TABLE_LEVEL = /table does not exist|column does not exist|table is dropped|not accepting writes|table busy/i;

/** What the QuestDB sink and the table setup use of the client; tests stand in for QuestDB here. */
export type QuestDbClient = Pick<QuestDbHttp, 'write' | 'exec' | 'close' | 'reconnect'>;

/**
 * A small HTTP client for QuestDB's ILP endpoint (`/write`) and SQL endpoint (`/exec`), on
 * kept-alive connections. QuestDB acknowledges the first write on a connection that had a table
 * open after that table was dropped, and those rows are lost (the next write on it is refused);
 * the QuestDB sinks keep what they delivered for a replay window and check the table's identity
 * every few seconds, so such a write is sent again on new connections (see QuestDbTarget.recover).
 */
export class QuestDbHttp {
  #pool: Pool;
  readonly #options: QuestDbOptions;
  readonly #authorization: string | undefined;
  readonly #timeoutMs: number;
  /** Whether writes go gzip-compressed: undefined until the server's build is known. */
  #gzip: boolean | undefined;

  constructor(options: QuestDbOptions) {
    this.#options = options;
    this.#timeoutMs = options.timeoutMs;
    this.#pool = newPool(options);
    this.#authorization = authorization(options);
    if (options.compression !== 'gzip') this.#gzip = false;
  }

  /**
   * Writes from now on go on new connections: after a table was dropped and made again, the first
   * write on a connection that had the old table open would be acknowledged and lost.
   */
  async reconnect(): Promise<void> {
    const old = this.#pool;
    this.#pool = newPool(this.#options);
    await old.close();
  }

  async write(body: Buffer): Promise<WriteOutcome> {
    const timeoutMs = this.#timeoutMs;
    let statusCode: number;
    let text: string;
    let retryAfter: string | string[] | undefined;
    try {
      const gzipped = (this.#gzip ?? (await this.#readsGzip())) ? await gzipBody(body) : undefined;
      const headers = this.#headers({ 'content-type': 'text/plain; charset=utf-8' });
      if (gzipped !== undefined) headers['content-encoding'] = 'gzip';
      const response = await this.#pool.request({
        path: '/write?precision=n',
        method: 'POST',
        headers,
        body: gzipped ?? body,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      statusCode = response.statusCode;
      text = await response.body.text();
      retryAfter = response.headers['retry-after'];
    } catch (error) {
      const failure = describeNetworkError(error);
      return { ok: false, kind: 'failed', ...failure };
    }
    if (statusCode === 204 || statusCode === 200) return { ok: true };
    const parsed = parseError(text);
    if (statusCode === 400 && parsed.line !== undefined && !TABLE_LEVEL.test(parsed.message)) {
      return { ok: false, kind: 'rejected', line: parsed.line, message: parsed.message };
    }
    const failed = { ok: false, kind: 'failed', message: answered(statusCode, parsed.message), level: statusLevel(statusCode) } as const;
    const retryAfterMs = statusCode === 429 || statusCode === 503 ? parseRetryAfter(retryAfter) : undefined;
    return retryAfterMs === undefined ? failed : { ...failed, retryAfterMs };
  }

  /**
   * Whether the server reads gzip bodies, from its build (`Build Information: QuestDB 9.3.4, …`):
   * an older QuestDB ignores Content-Encoding and would refuse the compressed bytes as malformed
   * lines, which the sink would set aside as dead letters. Asked once; when the question itself
   * fails (the server away, credentials refused, a server error) the write goes plain and the next
   * one asks again. A server that does not know the question is taken for one without gzip.
   */
  async #readsGzip(): Promise<boolean> {
    let build: string;
    try {
      const answer = await this.exec<{ dataset?: unknown[][] }>('SELECT build()');
      build = String(answer.dataset?.[0]?.[0] ?? '');
    } catch (error) {
      const status = error instanceof QuestDbError ? error.status : undefined;
      if (status === undefined || status === 401 || status === 403 || status >= 500) return false;
      build = error instanceof Error ? error.message : String(error);
    }
    const version = /QuestDB (?:Enterprise )?(\d+)\.(\d+)/.exec(build);
    const [major, minor] = version === null ? [0, 0] : [Number(version[1]), Number(version[2])];
    this.#gzip = major > GZIP_SINCE[0] || (major === GZIP_SINCE[0] && minor >= GZIP_SINCE[1]);
    this.#options.onCompression?.(this.#gzip, build);
    return this.#gzip;
  }

  /** Runs one SQL statement and returns QuestDB's JSON answer; throws QuestDbError on failure. */
  async exec<T = unknown>(sql: string): Promise<T> {
    const timeoutMs = this.#timeoutMs;
    let statusCode: number;
    let text: string;
    try {
      const response = await this.#pool.request({
        path: `/exec?query=${encodeURIComponent(sql)}`,
        method: 'GET',
        headers: this.#headers({}),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      statusCode = response.statusCode;
      text = await response.body.text();
    } catch (error) {
      const failure = describeNetworkError(error);
      throw new QuestDbError(failure.message, failure.level);
    }
    if (statusCode !== 200) throw new QuestDbError(answered(statusCode, parseError(text).message), statusLevel(statusCode), statusCode);
    return JSON.parse(text) as T;
  }

  /** Drops the connections; requests still running fail (used at shutdown, after the last flush). */
  close(): Promise<void> {
    return this.#pool.destroy();
  }

  #headers(headers: Record<string, string>): Record<string, string> {
    if (this.#authorization !== undefined) headers['authorization'] = this.#authorization;
    return headers;
  }
}

function newPool(options: QuestDbOptions): Pool {
  return new Pool(options.url, {
    connections: 2,
    pipelining: 1,
    // Idle connections are kept 10 s, longer than the QuestDB sink's 5 s between table checks.
    // QuestDB answers `Keep-Alive: timeout=5` but keeps an idle connection open far longer; undici
    // would take the hint less 2 s, close each connection 3 s after its request, and open new ones
    // (and destroy the old with an error and its stack trace) at every check.
    keepAliveTimeout: 10_000,
    keepAliveMaxTimeout: 10_000,
    keepAliveTimeoutThreshold: -10_000,
    ...(options.ca === undefined ? {} : { connect: { ca: options.ca } }),
  });
}

function parseError(text: string): { message: string; line?: number } {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown; line?: unknown };
    const message = typeof body.message === 'string' ? body.message : typeof body.error === 'string' ? body.error : text;
    return typeof body.line === 'number' ? { message, line: body.line } : { message };
  } catch {
    return { message: text.slice(0, 500) || 'no details' };
  }
}

function authorization(options: QuestDbOptions): string | undefined {
  if (options.token !== undefined) return `Bearer ${options.token}`;
  if (options.username === undefined) return undefined;
  return `Basic ${Buffer.from(`${options.username}:${options.password ?? ''}`).toString('base64')}`;
}

/** Refused credentials do not pass by themselves; everything else the server answers may. */
const statusLevel = (statusCode: number): FailureLevel => (statusCode === 401 || statusCode === 403 ? 'error' : 'warn');

function answered(statusCode: number, message: string): string {
  if (statusCode === 401) return `QuestDB refused the credentials (401): ${message}`;
  if (statusCode === 403) return `QuestDB refused access (403): ${message}`;
  return `QuestDB answered ${statusCode}: ${message}`;
}

/** Retry-After in seconds or as an HTTP date; undefined when absent or unreadable. */
function parseRetryAfter(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

// Node's codes for a server certificate that does not verify (unknown authority, expired, wrong name).
const CERTIFICATE_CODES = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/;

function describeNetworkError(error: unknown): { message: string; level: FailureLevel } {
  const e = error as { code?: string; name?: string; message?: string };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return { message: 'QuestDB did not answer in time', level: 'warn' };
  const detail = `${e.code ?? e.name ?? 'error'}${e.message ? ` (${e.message})` : ''}`;
  if (e.code !== undefined && CERTIFICATE_CODES.test(e.code)) {
    return { message: `QuestDB's TLS certificate was refused: ${detail}`, level: 'error' };
  }
  return { message: `QuestDB unreachable: ${detail}`, level: 'warn' };
}
