import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { fromSameOrigin, tokensMatch } from '../auth/csrf.js';
import type { Session } from '../auth/sessions.js';
import { IDLE_MS } from '../auth/sessions.js';
import type { GatewayConsole } from '../gateway-console.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { isEncrypted, isLoopback, peerAddress, requestHostname } from '../request-facts.js';

declare module 'hono' {
  interface ContextVariableMap {
    /** The console session a request belongs to; set by `requireSession`. */
    consoleSession: Session;
  }
}

/**
 * No script but the console's own file, no style but its stylesheet, nothing from elsewhere, no
 * framing, forms only to the console itself.
 */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** `__Host-` binds the cookie to this host and path `/`, over HTTPS only; plain HTTP (loopback) cannot use it. */
const sessionCookie = (c: Context): string => (isEncrypted(c) ? '__Host-harbor_console' : 'harbor_console');
const loginCookie = (c: Context): string => (isEncrypted(c) ? '__Host-harbor_login' : 'harbor_login');

const cookieOptions = (c: Context, maxAgeS: number) =>
  ({ path: '/', httpOnly: true, secure: isEncrypted(c), sameSite: 'Strict', maxAge: maxAgeS }) as const;

export const sessionToken = (c: Context): string | undefined => getCookie(c, sessionCookie(c));
export const setSessionCookie = (c: Context, token: string): void =>
  setCookie(c, sessionCookie(c), token, cookieOptions(c, IDLE_MS / 1000 + 60));
export const clearSessionCookie = (c: Context): void => void deleteCookie(c, sessionCookie(c), cookieOptions(c, 0));
export const loginToken = (c: Context): string | undefined => getCookie(c, loginCookie(c));
export const setLoginCookie = (c: Context, token: string): void => setCookie(c, loginCookie(c), token, cookieOptions(c, 3600));
export const clearLoginCookie = (c: Context): void => void deleteCookie(c, loginCookie(c), cookieOptions(c, 0));

/**
 * The console answers over TLS from anywhere, and over plain HTTP only to the machine itself: a
 * browser elsewhere on the LAN is sent to the HTTPS port. Every answer carries the security headers.
 */
export function consoleTransport(console: GatewayConsole): MiddlewareHandler {
  return async (c, next) => {
    if (!isEncrypted(c) && !isLoopback(peerAddress(c))) {
      const host = requestHostname(c);
      if ((c.req.method === 'GET' || c.req.method === 'HEAD') && host !== undefined && console.httpsPort > 0) {
        const url = new URL(c.req.url);
        const bracketed = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
        return c.redirect(`https://${bracketed}:${console.httpsPort}${url.pathname}${url.search}`, 308);
      }
      return c.text('The console is served over HTTPS only.', 403);
    }
    await next();
    c.header('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('X-Frame-Options', 'DENY');
    // same-origin, not no-referrer: under no-referrer browsers send `Origin: null` with forms, which the origin check refuses.
    c.header('Referrer-Policy', 'same-origin');
    c.header('Cross-Origin-Opener-Policy', 'same-origin');
    c.header('Cross-Origin-Resource-Policy', 'same-origin');
    if (!c.res.headers.has('Cache-Control')) c.header('Cache-Control', 'no-store');
    return undefined;
  };
}

/**
 * Console requests from the network without a live session (login pages and attempts, assets,
 * redirects) share one rate (`GatewayConsole.unauthenticated`): past it they are answered 429 at
 * once, so however many arrive they take little of the event loop the devices' requests need.
 * Loopback and sessions are not counted.
 */
export function withinRequestRate(console: GatewayConsole): MiddlewareHandler {
  return async (c, next) => {
    if (!isLoopback(peerAddress(c)) && console.sessions.find(sessionToken(c)) === undefined && !console.unauthenticated.take()) {
      return busy(c);
    }
    await next();
    return undefined;
  };
}

/** The answer to a request past the rate of requests without a session. */
export const busy = (c: Context): Response =>
  c.text('Too many requests without a console session: try again in a second.', 429, { 'Retry-After': '1', 'Cache-Control': 'no-store' });

/** A page of the console: without a live session, the browser is sent to the login page (and back after it). */
export function requireSession(console: GatewayConsole): MiddlewareHandler {
  return async (c, next) => {
    const session = console.sessions.find(sessionToken(c));
    if (session === undefined) {
      const next = c.req.method === 'GET' ? new URL(c.req.url).pathname : `${CONSOLE_PATH}/`;
      return c.redirect(`${CONSOLE_PATH}/login?next=${encodeURIComponent(next)}`, 303);
    }
    c.set('consoleSession', session);
    await next();
    return undefined;
  };
}

/**
 * Every form of a session carries its token, and a browser that names the request's origin must name
 * this one. An upload carries it in its URL instead, so its body can be streamed rather than parsed here.
 */
export function requireFormToken(where: 'body' | 'query' = 'body'): MiddlewareHandler {
  return async (c, next) => {
    const token = where === 'body' ? (await c.req.parseBody({ all: true }))['_csrf'] : c.req.query('_csrf');
    if (!fromSameOrigin(c) || !tokensMatch(c.get('consoleSession').csrf, token)) return formRefused(c);
    await next();
    return undefined;
  };
}

export const formRefused = (c: Context): Response =>
  c.text(
    'This form was not sent from a page of this console session (it expired, or came from another site). Reload the page and try again.',
    403,
  );
