import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { QueueReader, type QueueRecord } from '../queue/queue-reader.js';
import { QueueWriter } from '../queue/queue-writer.js';
import type { Delivery, Recovery, SinkTarget } from './sink.js';
import { SinkLoop } from './sink-loop.js';

// A sink with a replay window, on a real queue file and fake timers: what it sends again after a
// start, a failure or a resumed table, and when it lets delivered readings go.

const WINDOW_MS = 60_000;

/** A destination that records what it was sent and answers recoveries as told. */
class RecordingTarget implements SinkTarget {
  readonly name = 'questdb';
  readonly describe = 'a recording destination';
  readonly sent: number[][] = [];
  recoveries = 0;
  /** What every recovery answers until changed. */
  recovery: Recovery = { ok: true, resumed: false };
  /** The next recovery finds the table suspended and resumes it. */
  resumeOnce = false;
  nextDelivery: Delivery = { ok: true, requests: 1, deadLetters: [] };
  async deliver(records: readonly QueueRecord[]): Promise<Delivery> {
    const delivery = this.nextDelivery;
    if (delivery.ok) this.sent.push(records.map((r) => Number(r.payload.split('\t')[3])));
    this.nextDelivery = { ok: true, requests: 1, deadLetters: [] };
    return delivery;
  }
  async recover(): Promise<Recovery> {
    this.recoveries += 1;
    if (this.resumeOnce && this.recovery.ok) {
      this.resumeOnce = false;
      return { ok: true, resumed: true };
    }
    return this.recovery;
  }
  async close(): Promise<void> {}
}

let queue: QueueWriter;
let reader: QueueReader;
let loop: SinkLoop;
let target: RecordingTarget;

beforeEach(async () => {
  // The queue commits on setImmediate, which stays real.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] });
  queue = QueueWriter.open({
    dataDir: tempDir('replay'),
    durability: 'process-crash',
    maxBytes: 64 * 1024 * 1024,
    sinks: [{ name: 'questdb', backfill: true }],
  });
  for (let i = 0; i < 3; i++) await queue.append(`${i}\tship\tcargo\t${i}`, 1, 1000 + i);
  reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb', { keeps: true });
  target = new RecordingTarget();
  loop = new SinkLoop({
    reader,
    target,
    logger: pino({ level: 'silent' }),
    options: { intervalMs: 100, batchReadings: 10, batchBytes: 1 << 20, backoffMaxMs: 1000 },
    replay: { windowMs: WINDOW_MS, queue: reader },
    events: { delivered: () => undefined, failed: () => undefined },
  });
  loop.start();
  await vi.advanceTimersByTimeAsync(150);
});

afterEach(async () => {
  const stopped = loop.stop(Date.now() + 100);
  await vi.advanceTimersByTimeAsync(200);
  await stopped;
  reader.close();
  queue.close();
  vi.useRealTimers();
});

describe('a sink with a replay window', () => {
  it('checks the destination before its first delivery, and keeps what it delivered for the window', async () => {
    expect(target.recoveries).toBe(1);
    expect(target.sent).toEqual([[0, 1, 2]]);
    expect(reader.kept).toEqual({ segment: 1, lastId: 0 });

    await vi.advanceTimersByTimeAsync(WINDOW_MS - 1_000);
    expect(reader.kept).toEqual({ segment: 1, lastId: 0 });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(reader.kept).toEqual(reader.progress);
    expect(target.sent).toEqual([[0, 1, 2]]);
  });

  it('sends the kept readings again when the destination had to be resumed, and keeps them a window more', async () => {
    await vi.advanceTimersByTimeAsync(WINDOW_MS / 2);
    target.resumeOnce = true;
    await vi.advanceTimersByTimeAsync(WINDOW_MS / 2 + 10_000);

    expect(target.sent).toEqual([
      [0, 1, 2],
      [0, 1, 2],
    ]);
    expect(reader.kept).toEqual({ segment: 1, lastId: 0 });
    await vi.advanceTimersByTimeAsync(WINDOW_MS + 10_000);
    expect(reader.kept).toEqual(reader.progress);
  });

  it('sends the kept readings again after a failed delivery', async () => {
    await queue.append('3\tship\tcargo\t3', 1, 1003);
    target.nextDelivery = { ok: false, message: 'QuestDB unreachable' };
    await vi.advanceTimersByTimeAsync(2_000);

    expect(target.sent).toEqual([
      [0, 1, 2],
      [0, 1, 2, 3],
    ]);
  });

  it('keeps its readings the whole window when the wall clock steps, forward or back', async () => {
    // NTP sets the board's clock a day forward: the acknowledgements are not a day old for that.
    vi.setSystemTime(Date.now() + 86_400_000);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(reader.kept).toEqual({ segment: 1, lastId: 0 });
    // And back by two: the readings go once the window has passed, at the check due then (before
    // the first delivery, 5 s after it, and when the window ends: nothing new was delivered).
    vi.setSystemTime(Date.now() - 2 * 86_400_000);
    await vi.advanceTimersByTimeAsync(WINDOW_MS);
    expect(reader.kept).toEqual(reader.progress);
    expect(target.recoveries).toBe(3);
  });

  it('lets nothing go while the destination cannot be recovered', async () => {
    target.recovery = { ok: false, message: 'table stays suspended', level: 'error' };
    await vi.advanceTimersByTimeAsync(3 * WINDOW_MS);
    expect(reader.kept).toEqual({ segment: 1, lastId: 0 });

    target.recovery = { ok: true, resumed: true };
    await vi.advanceTimersByTimeAsync(2_000);
    expect(target.sent).toEqual([
      [0, 1, 2],
      [0, 1, 2],
    ]);
  });
});

describe('a sink with a replay window on a full disk', () => {
  it('lets everything the destination acknowledged go at once, after a check, while ingest refuses for a full disk', async () => {
    expect(reader.kept).toEqual({ segment: 1, lastId: 0 });
    const checks = target.recoveries;
    loop.shortOfDisk(true);
    await vi.advanceTimersByTimeAsync(200);
    expect(target.recoveries).toBeGreaterThan(checks);
    expect(reader.kept).toEqual(reader.progress);
    // Space again: what is delivered next is kept the whole window.
    loop.shortOfDisk(false);
    await queue.append('3\tship\tcargo\t3', 1, 1003);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(target.sent.flat()).toContain(3);
    expect(reader.kept).not.toEqual(reader.progress);
  });
});
