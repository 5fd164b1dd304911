import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import type { DeadLetterInput } from '../queue/queue-reader.js';
import { ReadOnlyQueue, laterMark } from '../queue/read-only-queue.js';
import { outgoingReadings } from '../sinks/outgoing-readings.js';
import { batchBody, chunkReadings } from '../sinks/upstream/batch-json.js';

export const QUEUE_USAGE = `harbor-gateway queue <command>

  export FILE --out OUT [--after OLD]
                 write the readings still queued in the queue file FILE (after the mark every sink
                 has passed) as ingest batches, for another release to take through its ingest API:
                 one JSON object a line, {"site": null or the site, "readings": N, "body": the
                 batch as the API takes it}, each reading with its stored time in full, so a
                 destination that has it already deduplicates it. With --after, only the records
                 after the last one of the queue file OLD (a copy taken before FILE was written on).
                 FILE is only read. Prints what was written as one JSON line.
`;

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** Readings in one exported batch: well inside any release's MAX_BATCH_READINGS and body limit. */
const BATCH_READINGS = 1000;
const BATCH_BYTES = 512 * 1024;

export interface ExportSummary {
  records: number;
  readings: number;
  batches: number;
  /** Records that could not be decoded, left out. */
  corrupt: number;
  /** Dead letters in FILE (after those of OLD): not exported, they stay in FILE. */
  deadLetters: number;
}

/** Exports FILE's queued readings into `out` (written beside and renamed, fsynced). */
export function exportQueue({ file, after, out }: { file: string; after?: string | undefined; out: string }): ExportSummary {
  const queue = new ReadOnlyQueue(file);
  let from = queue.commonMark();
  let deadLettersAfter = 0;
  try {
    if (after !== undefined) {
      const before = new ReadOnlyQueue(after);
      try {
        from = laterMark(from, before.lastRecord());
        deadLettersAfter = before.lastDeadLetterId();
      } finally {
        before.close();
      }
    }
    const summary: ExportSummary = {
      records: 0,
      readings: 0,
      batches: 0,
      corrupt: 0,
      deadLetters: queue.deadLettersAfter(deadLettersAfter),
    };
    const partial = `${out}.part`;
    const fd = openSync(partial, 'w', 0o600);
    try {
      for (const records of queue.recordsAfter(from)) {
        const corrupt: DeadLetterInput[] = [];
        const readings = outgoingReadings(records, corrupt);
        summary.records += records.length;
        summary.corrupt += corrupt.length;
        for (const chunk of chunkReadings(readings, BATCH_READINGS, BATCH_BYTES)) {
          const line = { site: chunk[0]!.record.site ?? null, readings: chunk.length, body: batchBody(chunk) };
          writeSync(fd, `${JSON.stringify(line)}\n`);
          summary.readings += chunk.length;
          summary.batches += 1;
        }
      }
      fsyncSync(fd);
    } catch (error) {
      closeSync(fd);
      rmSync(partial, { force: true });
      throw error;
    }
    closeSync(fd);
    renameSync(partial, out);
    return summary;
  } finally {
    queue.close();
  }
}

/** Runs the queue command; returns the exit status. */
export function queueCommand(args: string[], io: Output): number {
  const [command, ...rest] = args;
  if (command !== 'export') {
    if (command === 'help' || command === undefined) {
      io.out(QUEUE_USAGE);
      return 0;
    }
    io.err(`unknown queue command: ${command}\n\n${QUEUE_USAGE}`);
    return 64;
  }
  let file: string | undefined;
  let out: string | undefined;
  let after: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--out') out = rest[++i];
    else if (arg === '--after') after = rest[++i];
    else if (!arg.startsWith('--') && file === undefined) file = arg;
    else {
      io.err(`unknown argument: ${arg}\n\n${QUEUE_USAGE}`);
      return 64;
    }
  }
  if (file === undefined || out === undefined || out === '') {
    io.err(`queue export needs a queue file and --out\n\n${QUEUE_USAGE}`);
    return 64;
  }
  try {
    io.out(`${JSON.stringify(exportQueue({ file, after, out }))}\n`);
    return 0;
  } catch (error) {
    io.err(`harbor-gateway queue export: ${file}: ${(error as Error).message}\n`);
    return 1;
  }
}
