import type { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ASSET_VERSION, ASSETS } from '../assets/assets.js';
import type { GatewayConsole } from '../gateway-console.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { registerDeadLetterRoutes } from './dead-letters.js';
import { consoleTransport, requireSession, withinRequestRate } from './guard.js';
import { registerKeyRoutes } from './keys.js';
import { registerLoginRoutes } from './login.js';
import { auditLogins, auditLogouts } from './login-audit.js';
import { registerMetricsRoute } from './metrics.js';
import { registerPageRoutes } from './pages.js';
import { registerRollbackRoute } from './rollback.js';
import { registerSiteClaimRoutes } from './site-claims.js';
import { registerShipRoute } from './ship.js';
import { registerUpdateRoute } from './update.js';
import { registerAuditRoute } from './audit.js';

/** A console form is a few fields; anything larger is refused before it is read. */
const FORM_MAX_BYTES = 64 * 1024;

/**
 * Mounts the console under /console (the root sends browsers there) and `/metrics`. Order matters:
 * transport and headers first, then what needs no session (assets, login), then the session wall.
 */
export function mountConsole(app: Hono, console: GatewayConsole): void {
  registerMetricsRoute(app, console);
  app.get('/', (c) => c.redirect(`${CONSOLE_PATH}/`, 302));
  // The app matches paths with and without a trailing slash: this covers /console too.
  app.use(`${CONSOLE_PATH}/*`, withinRequestRate(console), consoleTransport(console));

  app.get(`${CONSOLE_PATH}/assets/:name`, (c) => {
    const asset = ASSETS.get(c.req.param('name'));
    if (asset === undefined) return c.text('Not found', 404);
    const cache = c.req.query('v') === ASSET_VERSION ? 'public, max-age=31536000, immutable' : 'no-cache';
    return c.body(asset.body, 200, { 'Content-Type': asset.type, 'Cache-Control': cache });
  });

  // Around everything a login or logout answers, the form's limit included.
  app.post(`${CONSOLE_PATH}/login`, auditLogins(console));
  app.post(`${CONSOLE_PATH}/logout`, auditLogouts(console));
  app.on(
    'POST',
    [
      `${CONSOLE_PATH}/login`,
      `${CONSOLE_PATH}/logout`,
      `${CONSOLE_PATH}/keys`,
      `${CONSOLE_PATH}/keys/*`,
      `${CONSOLE_PATH}/dead-letters`,
      `${CONSOLE_PATH}/dead-letters/*`,
      `${CONSOLE_PATH}/site-claims/*`,
      `${CONSOLE_PATH}/update/*`,
    ],
    bodyLimit({ maxSize: FORM_MAX_BYTES, onError: (c) => c.text('Form too large', 413) }),
  );
  registerLoginRoutes(app, console);

  app.use(`${CONSOLE_PATH}/*`, requireSession(console));
  registerPageRoutes(app, console);
  registerShipRoute(app, console);
  registerKeyRoutes(app, console);
  registerDeadLetterRoutes(app, console);
  registerSiteClaimRoutes(app, console);
  registerUpdateRoute(app, console);
  registerAuditRoute(app, console);
  registerRollbackRoute(app, console);
  app.all(`${CONSOLE_PATH}/*`, (c) => c.text('No such page in the console', 404));
}
