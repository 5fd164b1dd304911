import type { Hono } from 'hono';
import type { GatewayConsole } from '../gateway-console.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { renderPage } from '../render.js';
import { peerAddress } from '../request-facts.js';
import { requireFormToken } from './guard.js';

/** `POST /console/update`: the appliance's update upload (see update-bundle.ts); 404 where there is no installer. */
export function registerUpdateRoute(app: Hono, console: GatewayConsole): void {
  app.post(`${CONSOLE_PATH}/update`, requireFormToken('query'), async (c) => {
    const installer = console.updateInstaller();
    if (installer === undefined) return c.text('This system takes no update bundles here.', 404);
    const outcome = await installer.install(c.req.raw);
    console.deps.audit.record({
      action: 'update_uploaded',
      outcome: outcome.ok ? 'ok' : 'refused',
      actor: 'console',
      origin: peerAddress(c),
      detail: outcome.message,
    });
    return renderPage(
      c,
      { title: 'Update', page: 'settings', csrf: c.get('consoleSession').csrf, version: console.deps.version },
      <p class={outcome.ok ? 'notice' : 'error'} role="status">
        {outcome.message}
      </p>,
      outcome.ok ? 200 : 422,
    );
  });
}
