import type { Dispatcher } from 'undici';
import { reasonText } from '../dead-letter-reason.js';
import { upstreamDispatcher, type ConnectionOptions } from './dispatcher.js';

/** The self-hosted batch path, the one form a gateway serves: only a gateway takes site reports. */
const GATEWAY_BATCH_PATH = /\/api\/v2\/ingest\/batch\/?$/;
/** Where a gateway takes them, beside its ingest paths. */
const REPORT_PATH = '/api/v2/fleet/report';
/** A report is small and about now: a destination that takes long is asked again at the next report. */
const TIMEOUT_MS = 5_000;
/** An upstream that has no report endpoint (a self-hosted stack) is asked again this much later. */
const NOT_SERVED_PAUSE_MS = 3_600_000;

/**
 * The report endpoint of the upstream, when the upstream is a gateway's (or self-hosted stack's)
 * `…/api/v2/ingest/batch`; undefined for the hosted forms, which carry a harbor id and take no
 * reports: the hosted service is sent nothing but its API's batches.
 */
export function siteReportUrl(upstreamUrl: string): string | undefined {
  const url = new URL(upstreamUrl);
  if (!GATEWAY_BATCH_PATH.test(url.pathname)) return undefined;
  url.pathname = url.pathname.replace(GATEWAY_BATCH_PATH, REPORT_PATH);
  return url.toString();
}

/**
 * Sends the site's health report to the central gateway over the upstream's own address, key,
 * CA and proxy, on a kept-alive connection of its own (the sink's live in the delivery thread).
 * An upstream that answers 404 or 405 serves no reports (a self-hosted stack): it is asked again
 * an hour later.
 */
export class SiteReportSender {
  #dispatcher: Dispatcher | undefined;
  #pausedUntil = 0;

  constructor(
    private readonly url: string,
    private readonly apiKey: string,
    private readonly connection: Omit<ConnectionOptions, 'timeoutMs'>,
  ) {}

  /** Posts one report (JSON); resolves with what came of it, never throws. */
  async send(json: string, now = Date.now()): Promise<{ ok: true } | { ok: false; message: string }> {
    if (now < this.#pausedUntil) return { ok: false, message: 'the upstream serves no site reports' };
    try {
      this.#dispatcher ??= upstreamDispatcher({ ...this.connection, timeoutMs: TIMEOUT_MS });
      const url = new URL(this.url);
      const response = await this.#dispatcher.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': this.apiKey },
        body: json,
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      const text = await response.body.text();
      if (response.statusCode >= 200 && response.statusCode < 300) return { ok: true };
      if (response.statusCode === 404 || response.statusCode === 405) this.#pausedUntil = now + NOT_SERVED_PAUSE_MS;
      return { ok: false, message: `upstream answered ${response.statusCode}: ${reasonText(text).slice(0, 200)}` };
    } catch (error) {
      return { ok: false, message: `upstream unreachable: ${reasonText((error as Error).message)}` };
    }
  }

  async close(): Promise<void> {
    await this.#dispatcher?.close();
  }
}
