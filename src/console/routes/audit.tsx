import type { Hono } from 'hono';
import type { GatewayConsole } from '../gateway-console.js';
import { Audit } from '../pages/audit.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { renderPage, sessionFrame } from '../render.js';

/** Entries the page lists. */
const SHOWN = 200;

export function registerAuditRoute(app: Hono, console: GatewayConsole): void {
  app.get(`${CONSOLE_PATH}/audit`, (c) =>
    renderPage(
      c,
      sessionFrame(c, console.deps.version, 'audit', 'Audit trail'),
      <Audit entries={console.deps.audit.latest(SHOWN)} now={Date.now()} shown={SHOWN} />,
    ),
  );
}
