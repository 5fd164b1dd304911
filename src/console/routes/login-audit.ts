import type { MiddlewareHandler } from 'hono';
import type { GatewayConsole } from '../gateway-console.js';
import { peerAddress } from '../request-facts.js';
import { sessionToken } from './guard.js';

/**
 * Every login attempt into the audit trail, told by its answer: a redirect is a login, 429 one the
 * throttle turned away, any other answer a refusal. Wraps the login route, which knows nothing of it.
 */
export function auditLogins(console: GatewayConsole): MiddlewareHandler {
  return async (c, next) => {
    await next();
    const status = c.res.status;
    console.deps.audit.record({
      action: 'login',
      outcome: status === 303 ? 'ok' : status === 429 ? 'throttled' : 'refused',
      actor: 'console',
      origin: peerAddress(c),
      ...(status === 303 || status === 401 || status === 429 ? {} : { detail: `answered ${status}: ${refusalOf(status)}` }),
    });
  };
}

/** A logout ends a session that was live: a form without one is sent to the login page and is no logout. */
export function auditLogouts(console: GatewayConsole): MiddlewareHandler {
  return async (c, next) => {
    const token = sessionToken(c);
    const live = console.sessions.find(token) !== undefined;
    await next();
    if (live && console.sessions.find(token) === undefined)
      console.deps.audit.record({ action: 'logout', outcome: 'ok', actor: 'console', origin: peerAddress(c) });
  };
}

const refusalOf = (status: number): string =>
  status === 403 ? 'the form did not come from the login page' : status === 413 ? 'the form was too large' : 'not a login';
