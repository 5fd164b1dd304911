import type { Context, Hono } from 'hono';
import { tokensMatch } from '../auth/csrf.js';
import type { GatewayConsole } from '../gateway-console.js';
import { PROMETHEUS_TEXT } from '../metrics/exposition.js';
import { renderMetrics } from '../metrics/gateway-metrics.js';
import { isLoopback, peerAddress } from '../request-facts.js';
import { busy } from './guard.js';

export const METRICS_PATH = '/metrics';

/**
 * `/metrics`: answered to the machine itself, and to others that send `METRICS_TOKEN` as a bearer
 * token. Without a token set, loopback only, as a local agent (Telegraf, Vector, a Prometheus
 * agent) scrapes it. Device keys and the console password do not open it.
 */
export function registerMetricsRoute(app: Hono, console: GatewayConsole): void {
  const token = console.deps.metricsToken;
  app.get(METRICS_PATH, (c) => {
    if (!isLoopback(peerAddress(c))) {
      // Scrapes with the token are not counted: a flood cannot blind the site's monitoring.
      const given = /^Bearer (.+)$/i.exec(c.req.header('authorization') ?? '')?.[1];
      if (token !== undefined && tokensMatch(token, given)) return scrape(c);
      if (!console.unauthenticated.take()) return busy(c);
      if (token === undefined)
        return c.text('/metrics answers loopback clients only; set METRICS_TOKEN to scrape it from elsewhere\n', 403);
      return c.text('/metrics wants Authorization: Bearer <METRICS_TOKEN>\n', 401, { 'WWW-Authenticate': 'Bearer' });
    }
    return scrape(c);
  });

  const scrape = (c: Context): Response => {
    const now = Date.now();
    const snapshot = console.snapshot(now);
    return c.body(renderMetrics(snapshot, console.state(snapshot, now), console.refusals, console.deps.audit.counts()), 200, {
      'Content-Type': PROMETHEUS_TEXT,
      'Cache-Control': 'no-store',
    });
  };
}
