import type { QueueWriter } from '../queue/queue-writer.js';
import type { GatewayStats } from '../stats.js';
import { formatDuration, sinkLabel, sinkTrouble } from './gateway-state.js';
import { queueHolder, sinkSnapshot, type SinkDescription } from './snapshot.js';

/** A refused device retries soon: the reason is worked out at most this often. */
const CACHE_MS = 1_000;

/**
 * Why a full queue refuses readings, for the 503's message: the sink that holds the queue (of
 * those that never drop, the one furthest behind), how far behind it is and what ails it. Asked
 * for every refused request, so worked out once a second at most.
 */
export class QueueFullReason {
  #cached: { atMs: number; message: string } | undefined;

  constructor(
    private readonly queue: QueueWriter,
    private readonly stats: GatewayStats,
    private readonly sinks: readonly SinkDescription[],
  ) {}

  message(now = Date.now()): string {
    if (this.#cached !== undefined && now - this.#cached.atMs < CACHE_MS) return this.#cached.message;
    const blocking = this.sinks.filter((s) => s.policy === 'block').map((s) => sinkSnapshot(s, this.stats, this.queue, now));
    const holder = queueHolder(blocking);
    let message = 'The gateway queue is full; retry later';
    if (holder !== undefined) {
      const age = holder.oldestAgeSeconds === null ? '' : `, the oldest ${formatDuration(holder.oldestAgeSeconds)} old`;
      const trouble = sinkTrouble(holder);
      const backlog = `${holder.backlog.toLocaleString('en-US')} readings to deliver${age}`;
      message = `The gateway queue is full while ${sinkLabel(holder)} catches up (${trouble === undefined ? backlog : `${trouble}; ${backlog}`}); retry later`;
    }
    this.#cached = { atMs: now, message };
    return message;
  }
}
