/** The result of the latest flush attempt, as the status endpoint shows it. */
export interface FlushReport {
  at: string;
  ok: boolean;
  readings: number;
  durationMs: number;
  error?: string;
}

/** Counters since start, shared by ingest and flusher and read by the status endpoint. */
export class GatewayStats {
  readonly startedMs = Date.now();
  acceptedRequests = 0;
  acceptedReadings = 0;
  refusedRequests = 0;
  flushedReadings = 0;
  flushes = 0;
  flushFailures = 0;
  consecutiveFlushFailures = 0;
  deadLettered = 0;
  lastFlush: FlushReport | undefined;
  lastFlushError: { at: string; message: string } | undefined;
}
