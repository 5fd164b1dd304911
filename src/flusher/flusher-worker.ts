import { parentPort } from 'node:worker_threads';
import pino from 'pino';
import { createLogger } from '../log/logger.js';
import { QueueReader } from '../queue/queue-reader.js';
import type { Durability } from '../queue/queue-file.js';
import { Flusher, type FlusherOptions } from './flusher.js';
import { QuestDbHttp, type QuestDbOptions } from '../questdb/questdb-http.js';

export interface FlusherWorkerData {
  dataDir: string;
  durability: Durability;
  logLevel: pino.LevelWithSilent;
  questdb: QuestDbOptions;
  options: FlusherOptions;
}

export type ToFlusher = { type: 'wake' } | { type: 'stop'; deadline: number };

export type FromFlusher =
  | { type: 'flushed'; flushed: number; deadLettered: number; durationMs: number }
  | { type: 'failed'; message: string; readings: number; durationMs: number };

/**
 * The flusher thread: its own queue connection, QuestDB client and event loop, so reading,
 * encoding large batches and moving the progress mark never pause the ingest thread's requests.
 */
export async function runFlusherWorker(data: FlusherWorkerData): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('the flusher runs in a worker thread');
  const post = (message: FromFlusher): void => port.postMessage(message);
  // Written straight to stdout's file descriptor: a worker's process.stdout goes through the main thread.
  const logger = createLogger(data.logLevel, pino.destination({ dest: 1, sync: true })).child({ thread: 'flusher' });
  const reader = new QueueReader(data.dataDir, data.durability);
  const flusher = new Flusher({
    reader,
    questdb: new QuestDbHttp(data.questdb),
    logger,
    options: data.options,
    events: {
      flushed: ({ flushed, deadLettered, durationMs }) => post({ type: 'flushed', flushed, deadLettered, durationMs }),
      failed: (result) => post({ type: 'failed', ...result }),
    },
  });
  port.on('message', (message: ToFlusher) => {
    if (message.type === 'wake') {
      flusher.wake();
    } else {
      void flusher.stop(message.deadline).then(() => {
        reader.close();
        port.close();
      });
    }
  });
  flusher.start();
}
