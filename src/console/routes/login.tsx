import { randomBytes } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { fromSameOrigin, tokensMatch } from '../auth/csrf.js';
import type { GatewayConsole } from '../gateway-console.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { Login } from '../pages/login.js';
import { renderPage } from '../render.js';
import { peerAddress } from '../request-facts.js';
import {
  clearLoginCookie,
  clearSessionCookie,
  formRefused,
  loginToken,
  requireFormToken,
  requireSession,
  sessionToken,
  setLoginCookie,
  setSessionCookie,
} from './guard.js';

/** Only a console page may be the destination after logging in: never another site, never `//host`. */
const safeNext = (next: unknown): string =>
  typeof next === 'string' && next.startsWith(`${CONSOLE_PATH}/`) && !next.startsWith('//') && !next.includes('\\')
    ? next
    : `${CONSOLE_PATH}/`;

/** What became of a login attempt: the one place that decides it. */
export type LoginOutcome =
  | { kind: 'accepted' }
  | { kind: 'refused' }
  | { kind: 'throttled'; retryAfterS: number; reason: 'host' | 'everyone' };

/** Checks a password when the throttle gives the address a turn; a throttled attempt is not looked at. */
function attemptLogin(console: GatewayConsole, address: string, given: unknown): LoginOutcome {
  const turn = console.throttle.take(address);
  if (!turn.allowed) return { kind: 'throttled', retryAfterS: Math.max(1, Math.ceil(turn.retryAfterMs / 1000)), reason: turn.reason };
  if (typeof given !== 'string' || !console.password.matches(given)) {
    console.throttle.failed(address);
    return { kind: 'refused' };
  }
  console.throttle.succeeded(address);
  return { kind: 'accepted' };
}

function loginPage(
  c: Context,
  console: GatewayConsole,
  next: string,
  outcome?: Exclude<LoginOutcome, { kind: 'accepted' }>,
): Response | Promise<Response> {
  const token = randomBytes(24).toString('base64url');
  setLoginCookie(c, token);
  const throttled = outcome?.kind === 'throttled' ? outcome : undefined;
  if (throttled !== undefined) c.header('Retry-After', String(throttled.retryAfterS));
  return renderPage(
    c,
    { title: 'Log in', page: 'login', version: console.deps.version },
    <Login
      loginToken={token}
      next={next}
      failed={outcome?.kind === 'refused'}
      throttled={throttled}
      configured={console.password.configured}
    />,
    outcome === undefined ? 200 : throttled === undefined ? 401 : 429,
  );
}

export function registerLoginRoutes(app: Hono, console: GatewayConsole): void {
  app.get(`${CONSOLE_PATH}/login`, (c) => {
    const next = safeNext(c.req.query('next'));
    if (console.sessions.find(sessionToken(c)) !== undefined) return c.redirect(next, 303);
    return loginPage(c, console, next);
  });

  app.post(`${CONSOLE_PATH}/login`, async (c) => {
    const body = await c.req.parseBody({ all: true });
    if (!fromSameOrigin(c) || !tokensMatch(loginToken(c), body['_login'])) return formRefused(c);
    const next = safeNext(body['next']);
    const outcome = attemptLogin(console, peerAddress(c), body['password']);
    if (outcome.kind !== 'accepted') return loginPage(c, console, next, outcome);
    // A new session at every login: a token planted before it (session fixation) is worth nothing.
    console.sessions.end(sessionToken(c));
    setSessionCookie(c, console.sessions.create().token);
    clearLoginCookie(c);
    return c.redirect(next, 303);
  });

  app.post(`${CONSOLE_PATH}/logout`, requireSession(console), requireFormToken(), (c) => {
    console.sessions.end(sessionToken(c));
    clearSessionCookie(c);
    return c.redirect(`${CONSOLE_PATH}/login`, 303);
  });
}
