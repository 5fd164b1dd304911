import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import { problem } from '../../problem-details.js';
import type { FailureThrottle } from './failure-throttle.js';

export interface ApiKeyOptions {
  key: string;
  throttle: FailureThrottle;
  clientAddress: (c: Parameters<MiddlewareHandler>[0]) => string;
  logger: Logger;
}

// Comparing fixed-length digests keeps the comparison constant-time whatever length was sent.
const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

const KEY_LOC = ['header', 'x-api-key'];

/** Requires `X-API-Key` to equal the configured key; throttles addresses that keep failing. */
export function apiKey(options: ApiKeyOptions): MiddlewareHandler {
  const expected = digest(options.key);
  const { throttle, logger } = options;
  return async (c, next) => {
    const address = options.clientAddress(c);
    const waitMs = throttle.blockedForMs(address);
    if (waitMs > 0) {
      const seconds = Math.max(1, Math.ceil(waitMs / 1000));
      return problem(
        c,
        429,
        'Too many failed authentication attempts from this address',
        [{ loc: KEY_LOC, msg: `Retry after ${seconds} s`, type: 'rate_limited' }],
        { 'Retry-After': String(seconds) },
      );
    }
    const given = c.req.header('x-api-key');
    const missing = given === undefined || given === '';
    if (missing || !timingSafeEqual(digest(given), expected)) {
      if (throttle.recordFailure(address)) {
        logger.warn({ event: 'auth_throttled', address, windowMs: throttle.windowMs }, 'client address throttled after repeated authentication failures');
      }
      return missing
        ? problem(c, 401, 'Missing X-API-Key header', [{ loc: KEY_LOC, msg: 'Field required', type: 'missing' }])
        : problem(c, 401, 'Invalid API key', [{ loc: KEY_LOC, msg: 'API key is not valid', type: 'invalid_api_key' }]);
    }
    await next();
    return undefined;
  };
}
