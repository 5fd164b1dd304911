import { setTimeout as sleep } from 'node:timers/promises';
import type { Context, MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import type { KeyStore, Principal } from '../../../keys/key-store.js';
import { problem } from '../../problem-details.js';
import type { FailureDelay } from './failure-delay.js';

export interface ApiKeyOptions {
  keys: KeyStore;
  delay: FailureDelay;
  clientAddress: (c: Context) => string;
  /** Aborted when the gateway stops: delayed refusals are then answered at once, not holding up shutdown. */
  stopping: AbortSignal;
  logger: Logger;
  /** The request showed a valid device key: its connection is a device's from now on (the connection gate). */
  proven?: (c: Context) => void;
}

declare module 'hono' {
  interface ContextVariableMap {
    /** The key a request authenticated with; set by this middleware before any handler runs. */
    principal: Principal;
  }
}

const KEY_LOC = ['header', 'x-api-key'];

export const principalOf = (c: Context): Principal | undefined => c.get('principal');

/**
 * Requires `X-API-Key` to be one of the keys. A wrong or missing key is answered 401 after a delay
 * that grows with that address's failures; a valid key is never delayed or refused, so a device
 * behind the same NAT as a misconfigured one keeps working.
 */
export function apiKey(options: ApiKeyOptions): MiddlewareHandler {
  const { keys, delay, logger } = options;
  return async (c, next) => {
    const given = c.req.header('x-api-key');
    const missing = given === undefined || given === '';
    const principal = missing ? undefined : keys.authenticate(given);
    if (principal === undefined) {
      const address = options.clientAddress(c);
      const wasAtCap = delay.atCap(address);
      const waitMs = delay.recordFailure(address);
      if (!wasAtCap && delay.atCap(address)) {
        logger.warn({ event: 'auth_failures_delayed', address, delayMs: waitMs }, 'wrong API keys from this address are answered slowly');
      }
      await sleep(waitMs, undefined, { signal: options.stopping }).catch(() => undefined);
      return missing
        ? problem(c, 401, 'Missing X-API-Key header', [{ loc: KEY_LOC, msg: 'Field required', type: 'missing' }])
        : problem(c, 401, 'Invalid API key', [{ loc: KEY_LOC, msg: 'API key is not valid', type: 'invalid_api_key' }]);
    }
    c.set('principal', principal);
    options.proven?.(c);
    keys.counters.seen(principal.name);
    await next();
    if (c.res.status >= 400) keys.counters.refused(principal.name);
    return undefined;
  };
}
