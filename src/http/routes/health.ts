import type { Hono, MiddlewareHandler } from 'hono';
import type { WriteAheadQueue } from '../../queue/queue.js';
import type { GatewayStats } from '../../stats.js';

export interface HealthDeps {
  queue: WriteAheadQueue;
  stats: GatewayStats;
  isStopping: () => boolean;
  requireApiKey: MiddlewareHandler;
  version: string;
}

export const HEALTH_ROUTES = ['/healthz', '/readyz', '/status'] as const;

/**
 * `/healthz`: the process serves requests. `/readyz`: the queue takes readings (QuestDB being down
 * does not matter: the gateway buffers). `/status`: queue, flush and totals, behind the API key.
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

  app.get('/status', deps.requireApiKey, (c) => {
    const { queue, stats } = deps;
    const now = Date.now();
    const depth = queue.stats();
    const oldest = queue.oldestReceivedMs();
    return c.json({
      version: deps.version,
      uptimeSeconds: Math.round((now - stats.startedMs) / 1000),
      durability: queue.durability,
      ready: !deps.isStopping() && queue.isWritable(now),
      queue: {
        records: depth.records,
        readings: depth.readings,
        bytes: depth.bytes,
        maxBytes: depth.maxBytes,
        commits: depth.commits,
        oldestAgeSeconds: oldest === undefined ? null : Math.max(0, (now - oldest) / 1000),
      },
      deadLetters: queue.deadLetterCount(),
      flush: {
        last: stats.lastFlush ?? null,
        lastError: stats.lastFlushError ?? null,
        consecutiveFailures: stats.consecutiveFlushFailures,
      },
      totals: {
        acceptedRequests: stats.acceptedRequests,
        acceptedReadings: stats.acceptedReadings,
        refusedRequests: stats.refusedRequests,
        flushes: stats.flushes,
        flushFailures: stats.flushFailures,
        flushedReadings: stats.flushedReadings,
        deadLettered: stats.deadLettered,
      },
    });
  });
}
