import type { DeadLetterInput, QueueRecord } from '../queue/queue-reader.js';

/** What one attempt to deliver a batch of queue records came to. */
export type Delivery =
  /**
   * The destination holds every reading of the batch but the dead letters, which it refused for
   * their content (sending them again would be refused again). The sink's mark moves past the batch.
   */
  | {
      ok: true;
      requests: number;
      deadLetters: DeadLetterInput[];
      /** Readings not sent because the destination would not keep them (older than its retention). */
      expired?: number;
    }
  /**
   * Nothing of the batch may be taken as delivered: it is sent again after a backoff, or after
   * `retryAfterMs` when the destination asked for that (429/503 Retry-After). `level: 'error'`
   * marks a failure an operator has to fix (a refused key, a changed table), not a passing outage.
   */
  | { ok: false; message: string; retryAfterMs?: number; level?: 'warn' | 'error' };

export type Ready = { ok: true } | { ok: false; message: string; level?: 'warn' | 'error' };

/** What a destination's recovery found. */
export type Recovery = { ok: true; resumed: boolean } | { ok: false; message: string; level: 'warn' | 'error' };

/**
 * A destination of the queue's readings: how a batch gets there. The sink loop around it reads the
 * batches in queue order, times and backs off the attempts, and moves the sink's own progress mark.
 * A batch may reach a destination more than once (after a crash, or a timeout whose request did
 * arrive): a target must send every reading with its stored time, so that a replay lands on the
 * same keys.
 */
export interface SinkTarget {
  /** Short and stable: the key of the sink's progress mark, dead letters, status and health rows. */
  readonly name: string;
  /** What the destination is, for logs and /status, with no secret in it (no key, no token). */
  readonly describe: string;
  /**
   * Set-up the destination needs before readings go (a table), called before every attempt, also
   * with nothing queued, so that a fresh site's destination exists; a target remembers its own
   * success. A failure is a failed attempt, retried with backoff.
   */
  ready?(): Promise<Ready>;
  /** Sends the batch. */
  deliver(records: readonly QueueRecord[]): Promise<Delivery>;
  /**
   * For a destination that may lose what it acknowledged (a power cut within the kernel's writeback
   * age): brings it back to a state that applies writes. `resumed` says it had stopped applying
   * them, so what it acknowledged lately may be gone. For a sink with a replay window: called after
   * `ready`, before the first delivery, after a failure and every few seconds.
   */
  recover?(): Promise<Recovery>;
  /**
   * How far this site's clock is ahead of the destination's (ms, negative: behind), when the
   * destination told it (a Kafka broker refusing message times); undefined when not known.
   */
  clockAheadMs?(): number | undefined;
  /** Closes connections; called once, at shutdown. */
  close(): Promise<void>;
}

/**
 * What a remote sink does when the queue is full because of it (a long uplink outage): `block`
 * refuses new readings (503) until it catches up; `drop_oldest` skips its own oldest readings,
 * counted and logged, so the site keeps taking readings. The local QuestDB sink always blocks.
 */
export type SinkPolicy = 'block' | 'drop_oldest';

/**
 * In which order a remote sink sends a backlog: `oldest_first`, queue order; `current_first`, the
 * newest readings first after an outage, so the destination is current within a batch, then the
 * backlog behind them. Either way every reading once.
 */
export type SinkOrder = 'oldest_first' | 'current_first';

/** Settings every remote sink has beside its own. */
export interface RemoteSinkSettings {
  policy: SinkPolicy;
  /** A sink added to a running site starts at the newest reading; `true` starts it at the oldest still queued. */
  backfill: boolean;
  batchReadings: number;
}
