import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
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

function loginPage(c: Context, console: GatewayConsole, next: string, failed: boolean): Response | Promise<Response> {
  const token = randomBytes(24).toString('base64url');
  setLoginCookie(c, token);
  return renderPage(
    c,
    { title: 'Log in', page: 'login', version: console.deps.version },
    <Login loginToken={token} next={next} failed={failed} configured={console.password.configured} />,
    failed ? 401 : 200,
  );
}

export function registerLoginRoutes(app: Hono, console: GatewayConsole): void {
  app.get(`${CONSOLE_PATH}/login`, (c) => {
    const next = safeNext(c.req.query('next'));
    if (console.sessions.find(sessionToken(c)) !== undefined) return c.redirect(next, 303);
    return loginPage(c, console, next, false);
  });

  app.post(`${CONSOLE_PATH}/login`, async (c) => {
    const body = await c.req.parseBody({ all: true });
    if (!fromSameOrigin(c) || !tokensMatch(loginToken(c), body['_login'])) return formRefused(c);
    const next = safeNext(body['next']);
    const address = peerAddress(c);
    // Each attempt waits for its address's turn; only then is the password looked at.
    const wait = console.throttle.reserve(address);
    if (wait > 0) await sleep(wait);
    const given = body['password'];
    if (typeof given !== 'string' || !console.password.matches(given)) {
      console.throttle.failed(address);
      return loginPage(c, console, next, true);
    }
    console.throttle.succeeded(address);
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
