import type { Hono, MiddlewareHandler } from 'hono';
import type { QueueWriter } from '../../queue/queue-writer.js';
import type { GatewayStats } from '../../stats.js';
import type { KeyStore } from '../../keys/key-store.js';
import type { FailureDelay } from '../middleware/api-key/failure-delay.js';
import { takeSnapshot, type SiteClaimsSource, type SinkDescription, type TlsSummary } from '../../health/snapshot.js';

export interface HealthDeps {
  queue: QueueWriter;
  stats: GatewayStats;
  keys: KeyStore;
  failureDelay: FailureDelay;
  isStopping: () => boolean;
  requireApiKey: MiddlewareHandler;
  version: string;
  tls?: () => TlsSummary;
  sinks?: readonly SinkDescription[];
  idempotency?: { readonly size: number; readonly repeats: number; readonly forgottenEarly: number };
  identity?: { site: string; instance: string };
  siteClaims?: () => SiteClaimsSource;
}

export const HEALTH_ROUTES = ['/healthz', '/readyz', '/status'] as const;

/**
 * `/healthz`: the process serves requests. `/readyz`: the queue takes readings (QuestDB being down
 * does not matter: the gateway buffers). `/status`: queue, sinks and totals, behind the API key.
 */
export function registerHealthRoutes(app: Hono, deps: HealthDeps): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', (c) => {
    const reasons: string[] = [];
    if (deps.isStopping()) reasons.push('stopping');
    else if (deps.queue.isFull()) reasons.push('queue full');
    else if (!deps.queue.isWritable()) reasons.push('queue not writable (disk full or I/O error)');
    return reasons.length === 0 ? c.json({ status: 'ready' }) : c.json({ status: 'not ready', reasons }, 503);
  });

  app.get('/status', deps.requireApiKey, (c) => c.json(takeSnapshot(deps)));
}
