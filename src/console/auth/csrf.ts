import { timingSafeEqual } from 'node:crypto';
import type { Context } from 'hono';

/** Constant-time equality of two tokens; false when either is missing. */
export function tokensMatch(expected: string | undefined, given: unknown): boolean {
  if (expected === undefined || typeof given !== 'string') return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * False when the browser says the request came from another site: `Sec-Fetch-Site` other than
 * same-origin (or none: typed or bookmarked), or an `Origin` whose host is not the one asked.
 * Browsers without these headers fall back to the token alone, which every form carries.
 */
export function fromSameOrigin(c: Context): boolean {
  const site = c.req.header('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = c.req.header('origin');
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === c.req.header('host');
  } catch {
    return false;
  }
}
