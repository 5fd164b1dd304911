import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Completion, DeadLetterInput, QueueRecord } from '../../queue/queue-reader.js';
import type { Progress } from '../../queue/queue-file.js';
import type { QuestDbClient, WriteOutcome } from '../../questdb/questdb-http.js';
import { SinkLoop, type SinkLoopOptions, type SinkQueue } from '../sink-loop.js';
import { QuestDbTarget } from './questdb-target.js';

// The QuestDB sink (its loop and target) against stand-ins for its queue and QuestDB, on fake
// timers: what it sends, what it sets aside and when it tries again, without a database or a clock.

const OPTIONS: SinkLoopOptions = {
  intervalMs: 1000,
  batchReadings: 10,
  batchBytes: 1 << 20,
  backoffMaxMs: 4000,
};

/** Queue records in memory, with the progress mark and the dead letters the sink leaves. */
class FakeQueue implements SinkQueue {
  readonly records: QueueRecord[] = [];
  readonly reads: Progress[] = [];
  readonly deadLetters: DeadLetterInput[] = [];
  mark: Progress = { segment: 1, lastId: 0 };

  add(...payloads: string[]): void {
    for (const payload of payloads) {
      const readings = payload.split('\n').length;
      this.records.push({ segment: 1, id: this.records.length + 1, receivedMs: 0, readings, bytes: payload.length, payload });
    }
  }

  readOldest(maxReadings: number, maxBytes: number, from: Progress = this.mark): QueueRecord[] {
    this.reads.push(from);
    const batch: QueueRecord[] = [];
    let readings = 0;
    let bytes = 0;
    for (const record of this.records) {
      if (record.id <= from.lastId) continue;
      batch.push(record);
      readings += record.readings;
      bytes += record.bytes;
      if (readings >= maxReadings || bytes >= maxBytes) break;
    }
    return batch;
  }

  complete(records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[] = []): Completion {
    this.mark = { segment: 1, lastId: records.at(-1)!.id };
    this.deadLetters.push(...deadLetters);
    return { records: records.length, readings: records.reduce((sum, r) => sum + r.readings, 0), deadLettered: deadLetters.length };
  }

  get flushedAll(): boolean {
    return this.mark.lastId === this.records.length;
  }
}

/** A QuestDB that applies each request whole or not at all and refuses rows of ship `bad`. */
class FakeQuestDb implements QuestDbClient {
  readonly rows: string[] = [];
  readonly requests: number[] = [];
  /** When each write arrived (the fake clock). */
  readonly times: number[] = [];
  /** The answer to the next writes, before looking at the rows; undefined means look at them. */
  outage: WriteOutcome | undefined;
  /** Holds every write until released, to see what the sink does meanwhile. */
  hold: Promise<void> | undefined;

  async write(body: Buffer): Promise<WriteOutcome> {
    const lines = parseIlp(body);
    this.requests.push(lines.length);
    this.times.push(Date.now());
    await this.hold;
    if (this.outage !== undefined) return this.outage;
    const refused = lines.findIndex((line) => line.startsWith('bad\t'));
    if (refused >= 0) return { ok: false, kind: 'rejected', line: refused + 1, message: `bad row\nat ${refused + 1}` };
    this.rows.push(...lines);
    return { ok: true };
  }

  async exec<T>(sql: string): Promise<T> {
    if (sql.includes('FROM tables()')) return { dataset: [[1, true, false, 0, 'HOUR', false, 1, 1, '', '']] } as T;
    if (sql.includes('table_columns')) {
      const columns = [
        ['time', 'TIMESTAMP_NS', true],
        ['ship_id', 'SYMBOL', false],
        ['cargo_id', 'SYMBOL', false],
        ['value', 'DOUBLE', false],
        ['site', 'SYMBOL', false],
      ];
      return { dataset: columns } as T;
    }
    return {} as T;
  }

  async close(): Promise<void> {}
  async reconnect(): Promise<void> {}
}

/** ILP lines back as "ship\tcargo\ttime": the double is 8 binary bytes, so lines are cut by their structure. */
function parseIlp(body: Buffer): string[] {
  const lines: string[] = [];
  let at = 0;
  while (at < body.length) {
    const marker = body.indexOf('value==\u0010', at, 'latin1');
    if (marker < 0) throw new Error(`no ILP line at byte ${at}`);
    const head = body.subarray(at, marker).toString('utf8');
    const [, ship, cargo] = /^[^,]+,ship_id=(.*),cargo_id=(.*),site=site-a $/.exec(head)!;
    const timeStart = marker + 'value==\u0010'.length + 8 + 1;
    const timeEnd = body.indexOf('n\n', timeStart, 'latin1');
    lines.push(`${ship}\t${cargo}\t${body.subarray(timeStart, timeEnd).toString('latin1')}`);
    at = timeEnd + 2;
  }
  return lines;
}

/** Advances the fake clock until the sink sends its next request; returns when that was. */
async function nextRequest(): Promise<number> {
  const before = questdb.requests.length;
  while (questdb.requests.length === before) await vi.advanceTimersByTimeAsync(5);
  return questdb.times.at(-1)!;
}

const record = (ships: string[], from = 0): string => ships.map((ship, i) => `${from + i}\t${ship}\tt\t1.5`).join('\n');

let queue: FakeQueue;
let questdb: FakeQuestDb;
let events: { flushed: number; failed: string[] };
let sink: SinkLoop;

beforeEach(() => {
  vi.useFakeTimers();
  queue = new FakeQueue();
  questdb = new FakeQuestDb();
  events = { flushed: 0, failed: [] };
  const logger = pino({ level: 'silent' });
  sink = new SinkLoop({
    reader: queue,
    target: new QuestDbTarget({
      questdb,
      logger,
      options: { name: 'questdb', describe: 'fake', table: 'cargo_data', retentionDays: 0, site: 'site-a', resumesWal: true },
    }),
    logger,
    options: OPTIONS,
    events: { delivered: (r) => (events.flushed += r.delivered), failed: (r) => events.failed.push(r.message) },
  });
});

afterEach(async () => {
  const stopped = sink.stop(Date.now() + 1000);
  await vi.advanceTimersByTimeAsync(2000);
  await stopped;
  vi.useRealTimers();
});

describe('QuestDB sink', () => {
  it('sets aside exactly the rows QuestDB refuses and sends every other row once', async () => {
    const ships = Array.from({ length: 9 }, (_, i) => ([2, 3, 7].includes(i) ? 'bad' : `ship-${i}`));
    queue.add(record(ships.slice(0, 5)), record(ships.slice(5), 5));
    sink.start();
    await vi.advanceTimersByTimeAsync(OPTIONS.intervalMs);

    expect(queue.flushedAll).toBe(true);
    expect(questdb.rows.map((row) => row.split('\t')[0])).toEqual(ships.filter((ship) => ship !== 'bad'));
    expect(queue.deadLetters.map((d) => d.line)).toEqual(['2\tbad\tt\t1.5', '3\tbad\tt\t1.5', '7\tbad\tt\t1.5']);
    // QuestDB's reason on one line, for the operator's list.
    expect(queue.deadLetters[0]!.reason).toBe('QuestDB refused the reading: bad row at 1');
    expect(events).toEqual({ flushed: 6, failed: [] });
  });

  it('keeps a corrupt record as one dead letter and sends the records around it', async () => {
    queue.add(record(['a']), 'not a record', record(['b'], 1));
    sink.start();
    await vi.advanceTimersByTimeAsync(OPTIONS.intervalMs);

    expect(questdb.rows.map((row) => row.split('\t')[0])).toEqual(['a', 'b']);
    expect(queue.deadLetters).toMatchObject([{ line: 'not a record', reason: expect.stringMatching(/^corrupt queue record/) }]);
  });

  it('reads the next batch while QuestDB works on the current one', async () => {
    for (let i = 0; i < 30; i++) queue.add(record([`ship-${i}`], i));
    let release!: () => void;
    questdb.hold = new Promise((resolve) => (release = resolve));
    sink.start();
    await vi.advanceTimersByTimeAsync(OPTIONS.intervalMs);

    // One request with QuestDB, not yet answered; the batch after it already read, from its end.
    expect(questdb.requests).toEqual([10]);
    expect(queue.reads).toEqual([
      { segment: 1, lastId: 0 },
      { segment: 1, lastId: 10 },
    ]);
    expect(queue.mark.lastId).toBe(0);
    release();
    questdb.hold = undefined;
    // A full batch means more waits: the next requests go at once, well within the interval.
    await vi.advanceTimersByTimeAsync(OPTIONS.intervalMs / 10);
    expect(queue.flushedAll).toBe(true);
    expect(questdb.rows).toHaveLength(30);
  });

  it('backs off exponentially while QuestDB fails, leaves the queue alone, and starts over after a success', async () => {
    queue.add(record(['a']));
    questdb.outage = { ok: false, kind: 'failed', message: 'QuestDB unreachable: ECONNREFUSED', level: 'warn' };
    sink.start();
    await vi.advanceTimersByTimeAsync(OPTIONS.intervalMs);
    expect(questdb.requests).toHaveLength(1);
    // A backlog wakes the sink every 50 ms meanwhile: it never cuts a backoff short.
    const ceilings = [250, 500, 1000, 2000, 4000, 4000];
    while (questdb.requests.length <= ceilings.length) {
      sink.wake();
      await vi.advanceTimersByTimeAsync(50);
    }
    // The n-th wait lies in [c/2, c) with c = 250 ms · 2^n, capped at backoffMaxMs.
    const waits = questdb.times.slice(1).map((time, i) => time - questdb.times[i]!);
    waits.forEach((wait, i) => {
      expect(wait).toBeGreaterThanOrEqual(ceilings[i]! / 2);
      expect(wait).toBeLessThan(ceilings[i]!);
    });
    expect(queue.mark.lastId).toBe(0);
    expect(events.failed).toHaveLength(ceilings.length + 1);

    questdb.outage = undefined;
    await nextRequest();
    expect(queue.flushedAll).toBe(true);
    queue.add(record(['b'], 1));
    questdb.outage = { ok: false, kind: 'failed', message: 'QuestDB did not answer in time', level: 'warn' };
    const failed = await nextRequest();
    // After a success the backoff starts again from its first step.
    const retried = await nextRequest();
    expect(retried - failed).toBeGreaterThanOrEqual(125);
    expect(retried - failed).toBeLessThan(250);
  });

  it('stops with the table at fault instead of dead-lettering every row when the table changed', async () => {
    queue.add(record(['bad']));
    sink.start();
    await vi.advanceTimersByTimeAsync(OPTIONS.intervalMs);
    expect(queue.deadLetters).toHaveLength(1);

    // Now the table loses its value column: the refusal is the table's, not the reading's.
    queue.add(record(['bad'], 1));
    const exec = questdb.exec.bind(questdb);
    questdb.exec = async <T>(sql: string): Promise<T> =>
      sql.includes('table_columns')
        ? ({
            dataset: [
              ['time', 'TIMESTAMP_NS', true],
              ['ship_id', 'SYMBOL', false],
              ['cargo_id', 'SYMBOL', false],
            ],
          } as T)
        : exec<T>(sql);
    await vi.advanceTimersByTimeAsync(OPTIONS.intervalMs);
    expect(queue.deadLetters).toHaveLength(1);
    expect(queue.mark.lastId).toBe(1);
    expect(events.failed.at(-1)).toMatch(/table check failed: table cargo_data has no column value/);
  });
});
