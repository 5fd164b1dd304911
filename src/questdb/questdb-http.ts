import { Pool } from 'undici';

export interface QuestDbOptions {
  url: string;
  /** Longest wait for one answer, writes and SQL alike. */
  timeoutMs: number;
  username: string | undefined;
  password: string | undefined;
}

/** The outcome of one ILP/HTTP write. QuestDB applies a request all or nothing. */
export type WriteOutcome =
  | { ok: true }
  /** QuestDB refused a line for its content; `line` is 1-based within the request. */
  | { ok: false; kind: 'rejected'; line: number; message: string }
  /** Nothing was written for a reason that may pass: network, timeout, 5xx, auth or a table problem. */
  | { ok: false; kind: 'failed'; message: string };

export class QuestDbError extends Error {
  override name = 'QuestDbError';
}

// Errors about the table rather than the row: retried after the table is set up again, never dead-lettered.
const TABLE_LEVEL = /table does not exist|column does not exist|table is dropped|not accepting writes|table busy/i;

/** What the QuestDB sink and the table setup use of the client; tests stand in for QuestDB here. */
export type QuestDbClient = Pick<QuestDbHttp, 'write' | 'exec' | 'close'>;

/** A small HTTP client for QuestDB's ILP endpoint (`/write`) and SQL endpoint (`/exec`). */
export class QuestDbHttp {
  readonly #pool: Pool;
  readonly #authorization: string | undefined;
  readonly #timeoutMs: number;

  constructor(options: QuestDbOptions) {
    this.#timeoutMs = options.timeoutMs;
    this.#pool = new Pool(options.url, { connections: 2, pipelining: 1, keepAliveTimeout: 10_000 });
    this.#authorization =
      options.username === undefined
        ? undefined
        : `Basic ${Buffer.from(`${options.username}:${options.password ?? ''}`).toString('base64')}`;
  }

  async write(body: Buffer): Promise<WriteOutcome> {
    const timeoutMs = this.#timeoutMs;
    let statusCode: number;
    let text: string;
    try {
      const response = await this.#pool.request({
        path: '/write?precision=n',
        method: 'POST',
        // A fresh connection per write: QuestDB acknowledges a write to a table dropped meanwhile
        // when it arrives on a connection that had the table open, and the rows are lost with it.
        reset: true,
        headers: this.#headers({ 'content-type': 'text/plain; charset=utf-8' }),
        body,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      statusCode = response.statusCode;
      text = await response.body.text();
    } catch (error) {
      return { ok: false, kind: 'failed', message: describeNetworkError(error) };
    }
    if (statusCode === 204 || statusCode === 200) return { ok: true };
    const parsed = parseError(text);
    if (statusCode === 400 && parsed.line !== undefined && !TABLE_LEVEL.test(parsed.message)) {
      return { ok: false, kind: 'rejected', line: parsed.line, message: parsed.message };
    }
    return { ok: false, kind: 'failed', message: `QuestDB answered ${statusCode}: ${parsed.message}` };
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
      throw new QuestDbError(describeNetworkError(error));
    }
    if (statusCode !== 200) throw new QuestDbError(`QuestDB answered ${statusCode}: ${parseError(text).message}`);
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

function parseError(text: string): { message: string; line?: number } {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown; line?: unknown };
    const message = typeof body.message === 'string' ? body.message : typeof body.error === 'string' ? body.error : text;
    return typeof body.line === 'number' ? { message, line: body.line } : { message };
  } catch {
    return { message: text.slice(0, 500) || 'no details' };
  }
}

function describeNetworkError(error: unknown): string {
  const e = error as { code?: string; name?: string; message?: string };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'QuestDB did not answer in time';
  return `QuestDB unreachable: ${e.code ?? e.name ?? 'error'}${e.message ? ` (${e.message})` : ''}`;
}
