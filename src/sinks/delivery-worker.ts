import { getHeapStatistics } from 'node:v8';
import { parentPort } from 'node:worker_threads';
import type pino from 'pino';
import { createLogger } from '../log/logger.js';
import type { Durability, Progress } from '../queue/queue-file.js';
import { QueueReader } from '../queue/queue-reader.js';
import type { CheckpointFiles } from '../queue/checkpoint.js';
import { compareMarks } from '../queue/sink-marks.js';
import { createTarget, type SinkSpec } from './registry.js';
import { SinkLoop, type SinkLoopOptions } from './sink-loop.js';
import { AppendSignal } from './append-signal.js';
import { SinkBudget } from './sink-budget.js';
import { SinkWakes } from './sink-wakes.js';
import { SinkThinning } from './thinning/sink-thinning.js';
import type { ThinningRule } from './thinning/thinning-rules.js';

/** The local QuestDB's sink: the site's own record, which keeps every reading and is never thinned. */
const LOCAL_SINK = 'questdb';

export interface DeliveryWorkerData {
  dataDir: string;
  durability: Durability;
  logLevel: pino.LevelWithSilent;
  batchBytes: number;
  backoffMaxMs: number;
  sinks: SinkSpec[];
  /** Ingest's commit count (AppendSignal), set by DeliveryThread: idle sinks sleep until it changes. */
  appended?: SharedArrayBuffer;
  /** Each sink's count of appended readings at its last read (SinkWakes), set by DeliveryThread. */
  wakes?: SharedArrayBuffer;
  /** The queue writer's checkpoint state and files (checkpoint.ts), set by DeliveryThread. */
  checkpoints?: { state: SharedArrayBuffer; files: CheckpointFiles };
  /** The catalogue's thinning rules at the start, for every sink but the local QuestDB's. */
  thinning?: ThinningRule[];
}

export type ToDelivery =
  /** These sinks (their indices in `sinks`) have a whole batch of their own waiting. */
  | { type: 'wake'; sinks: number[] }
  | { type: 'pressure'; bytes: number }
  | { type: 'disk'; full: boolean }
  | { type: 'stop'; deadline: number };

export type FromDelivery =
  | {
      type: 'delivered';
      sink: string;
      delivered: number;
      expired: number;
      thinned: number;
      sentBytes: number;
      taken: number;
      deadLettered: number;
      durationMs: number;
    }
  | { type: 'failed'; sink: string; message: string; readings: number; durationMs: number }
  | { type: 'dropped'; sink: string; readings: number; records: number }
  /** The sink passed readings re-queued for another sink: off its backlog, not delivered. */
  | { type: 'passed'; sink: string; readings: number }
  /** An attempt of the sink has been without an outcome since `sinceMs`. */
  | { type: 'waiting'; sink: string; sinceMs: number }
  /** What the sink's destination told of this site's clock: ms ahead (negative: behind), null when nothing. */
  | { type: 'clock'; sink: string; aheadMs: number | null }
  | { type: 'pressure_handled' }
  | { type: 'heap'; usedBytes: number; totalBytes: number }
  /** A checkpoint's pages were lost here (checkpoint.ts): the process must end without closing the queue file. */
  | { type: 'queue_sync_lost'; message: string };

/** How often the thread reports its heap, which /status shows beside the HTTP thread's. */
const HEAP_REPORT_MS = 10_000;

interface Sink {
  spec: SinkSpec;
  reader: QueueReader;
  loop: SinkLoop;
}

/**
 * The delivery thread: every sink's loop, each with its own queue connection and progress mark, on
 * one event loop of their own, so reading, encoding and moving marks never pause the ingest thread,
 * and a slow or unreachable destination holds back no other sink.
 */
export async function runDeliveryWorker(data: DeliveryWorkerData): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('delivery runs in a worker thread');
  const post = (message: FromDelivery): void => port.postMessage(message);
  // Written straight to stdout's file descriptor: a worker's process.stdout goes through the main thread.
  const logger = createLogger(data.logLevel).child({ thread: 'delivery' });
  const appended = data.appended === undefined ? undefined : new AppendSignal(data.appended);
  const batches = data.sinks.map((s) => s.batchReadings);
  const wakes = data.wakes === undefined ? undefined : new SinkWakes(batches, data.wakes);
  const targets = await Promise.all(data.sinks.map(async (spec) => ({ spec, target: await createTarget(spec, logger) })));
  const sinks: Sink[] = targets.map(({ spec, target }, index) => {
    const replayWindowMs = spec.replayWindowMs ?? 0;
    const reader = new QueueReader(data.dataDir, data.durability, spec.name, {
      keeps: replayWindowMs > 0,
      reserve: true,
      onReserveReleased: () =>
        logger.warn(
          { event: 'queue_reserve_used', sink: spec.name },
          'the disk is full: the queue reserve was used to record deliveries; ingest resumes once the delivered readings made room',
        ),
      checkpoints: data.checkpoints && {
        ...data.checkpoints,
        onLost: (error) => post({ type: 'queue_sync_lost', message: String((error.cause as Error | undefined)?.message ?? error.message) }),
      },
    });
    const thinning = sinkThinning(spec, reader, data.thinning ?? [], replayWindowMs > 0);
    const currentFirst = spec.order === 'current_first' && thinning === undefined && replayWindowMs === 0;
    if (spec.order === 'current_first' && !currentFirst) {
      logger.warn(
        { event: 'current_first_off', sink: spec.name },
        `${spec.name} sends its backlog oldest first: its thinning (or replay window) decides in queue order`,
      );
    }
    const loop = new SinkLoop({
      reader,
      target,
      logger,
      options: sinkLoopOptions(spec, data),
      replay: { windowMs: replayWindowMs, queue: reader },
      ...(appended === undefined ? {} : { appended }),
      ...(wakes === undefined ? {} : { reading: () => wakes.reading(index) }),
      ...(thinning === undefined ? {} : { thinning }),
      ...(currentFirst ? { currentFirst: reader } : {}),
      ...((spec.maxBytesPerS ?? 0) > 0 ? { budget: new SinkBudget(spec.maxBytesPerS!, spec.cheapHours) } : {}),
      events: {
        delivered: ({ delivered, expired, thinned, sentBytes, readings, deadLettered, durationMs }) =>
          post({ type: 'delivered', sink: spec.name, delivered, expired, thinned, sentBytes, taken: readings, deadLettered, durationMs }),
        failed: (result) => post({ type: 'failed', sink: spec.name, ...result }),
        passed: (readings) => post({ type: 'passed', sink: spec.name, readings }),
        waiting: (sinceMs) => post({ type: 'waiting', sink: spec.name, sinceMs }),
        clock: (aheadMs) => post({ type: 'clock', sink: spec.name, aheadMs: aheadMs ?? null }),
      },
    });
    return { spec, reader, loop };
  });

  const reportHeap = (): void => {
    const heap = getHeapStatistics();
    post({ type: 'heap', usedBytes: heap.used_heap_size, totalBytes: heap.total_heap_size });
  };
  reportHeap();
  const heapTimer = setInterval(reportHeap, HEAP_REPORT_MS);
  heapTimer.unref();

  port.on('message', (message: ToDelivery) => {
    if (message.type === 'wake') {
      for (const index of message.sinks) sinks[index]?.loop.wake();
    } else if (message.type === 'pressure') {
      try {
        dropOldest(sinks, message.bytes, logger, post);
      } catch (error) {
        logger.error({ event: 'drop_oldest_failed', err: error }, 'could not skip the oldest readings (disk full?)');
      }
      post({ type: 'pressure_handled' });
    } else if (message.type === 'disk') {
      for (const sink of sinks) sink.loop.shortOfDisk(message.full);
    } else {
      clearInterval(heapTimer);
      void Promise.all(sinks.map((sink) => sink.loop.stop(message.deadline))).then(() => {
        for (const sink of sinks) sink.reader.close();
        port.close();
      });
    }
  });
  for (const sink of sinks) sink.loop.start();
}

/** A sink's loop goes at its own interval and batch size; bytes and backoff are every sink's. */
export function sinkLoopOptions(spec: SinkSpec, data: Pick<DeliveryWorkerData, 'batchBytes' | 'backoffMaxMs'>): SinkLoopOptions {
  return {
    intervalMs: spec.flushIntervalMs,
    batchReadings: spec.batchReadings,
    batchBytes: data.batchBytes,
    backoffMaxMs: data.backoffMaxMs,
  };
}

/**
 * A forwarding sink's thinning: with rules, or without any but with state left by earlier rules (whose
 * open summaries are then sent). None for the local QuestDB, nor for a sink with neither.
 */
function sinkThinning(spec: SinkSpec, reader: QueueReader, rules: ThinningRule[], keeps: boolean): SinkThinning | undefined {
  if (spec.name === LOCAL_SINK || (rules.length === 0 && reader.state.size === 0)) return undefined;
  return new SinkThinning({ sink: spec.name, rules, stored: reader.state, keeps });
}

/**
 * A full queue: the `drop_oldest` sinks skip their oldest readings, as far as the slowest sink that
 * must keep everything (a blocking one) allows, since only that makes room.
 */
function dropOldest(sinks: readonly Sink[], bytes: number, logger: pino.Logger, post: (message: FromDelivery) => void): void {
  const dropping = sinks.filter((s) => s.spec.policy === 'drop_oldest');
  if (dropping.length === 0) return;
  const marks = dropping[0]!.reader.marks();
  const end: Progress = { segment: Number.MAX_SAFE_INTEGER, lastId: Number.MAX_SAFE_INTEGER };
  const limit = sinks
    .filter((s) => s.spec.policy === 'block')
    .map((s) => marks.get(s.spec.name) ?? end)
    .reduce((a, b) => (compareMarks(a, b) <= 0 ? a : b), end);
  // The slowest dropping sink skips `bytes`; the others only as far as it got, or nothing is freed.
  const slowestFirst = [...dropping].sort((a, b) => compareMarks(marks.get(a.spec.name) ?? end, marks.get(b.spec.name) ?? end));
  let reach = limit;
  for (const [i, sink] of slowestFirst.entries()) {
    const skipped = sink.reader.skipOldest(i === 0 ? bytes : Number.POSITIVE_INFINITY, reach);
    if (i === 0) reach = compareMarks(sink.reader.progress, limit) <= 0 ? sink.reader.progress : limit;
    if (skipped.records === 0) continue;
    logger.warn(
      { event: 'dropped_oldest', sink: sink.spec.name, readings: skipped.readings, records: skipped.records },
      `queue full: ${sink.spec.name} skipped its oldest readings (policy drop_oldest)`,
    );
    post({ type: 'dropped', sink: sink.spec.name, readings: skipped.readings, records: skipped.records });
  }
}
