/** Why the queue could not take a request; every kind maps to 503 with Retry-After. */
export type QueueRefusal = 'full' | 'disk_full' | 'io_error' | 'closed';

/** A full queue's refusal, as the queue knows it; ingest names the sink that holds it. */
export const QUEUE_FULL_MESSAGE = 'The gateway queue is full; retry later';

/** After a failed checkpoint (checkpoint.ts) the gateway restarts; what it answered is in its log. */
export const SYNC_LOST_MESSAGE = 'The gateway could not make its queue durable and is restarting; retry shortly';

export class QueueRefusedError extends Error {
  override name = 'QueueRefusedError';
  constructor(
    readonly refusal: QueueRefusal,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Maps a SQLite failure during a write to a refusal the client can act on. */
export function classifyWriteError(error: unknown): QueueRefusedError {
  if (error instanceof QueueRefusedError) return error;
  const code = (error as { code?: unknown }).code;
  if (code === 'SQLITE_FULL') return new QueueRefusedError('disk_full', 'The gateway disk is full; retry later', { cause: error });
  return new QueueRefusedError('io_error', 'The gateway could not write its queue; retry later', { cause: error });
}

/**
 * The request's client closed the connection before its readings were committed: nothing of it is
 * stored, as nobody would receive the answer and the client sends it again.
 */
export class RequestAbandonedError extends Error {
  override name = 'RequestAbandonedError';
  constructor() {
    super('the client closed the connection before the readings were committed');
  }
}
