/** Waits a destination asks for are kept within these: never a tight loop, never hours of silence. */
export const MIN_RETRY_AFTER_MS = 1000;
export const MAX_RETRY_AFTER_MS = 10 * 60 * 1000;

/**
 * A `Retry-After` header (delay in seconds, or an HTTP date) as milliseconds from `nowMs`, within
 * the bounds above; undefined when absent or unreadable, so the sink's own backoff applies.
 */
export function parseRetryAfter(header: string | undefined, nowMs = Date.now()): number | undefined {
  const text = header?.trim();
  if (!text) return undefined;
  let ms: number;
  if (/^\d+$/.test(text)) {
    ms = Number(text) * 1000;
  } else {
    // An HTTP date starts with the day's name; Date.parse alone would read "-5" as a year.
    const at = /^[A-Za-z]{3}/.test(text) ? Date.parse(text) : Number.NaN;
    if (Number.isNaN(at)) return undefined;
    ms = at - nowMs;
  }
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(MIN_RETRY_AFTER_MS, ms));
}
