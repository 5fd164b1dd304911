import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { QueueRecord } from '../queue/queue-reader.js';
import type { Delivery, SinkTarget } from './sink.js';
import { SinkLoop, type SinkQueue } from './sink-loop.js';

// The loop around any destination, on fake timers: how long it waits when a destination asks for
// time, and that a target that throws is a failed attempt, not a dead loop.

const record: QueueRecord = { segment: 1, id: 1, receivedMs: 0, readings: 1, bytes: 10, payload: '1\ts\tc\t1' };

class OneRecordQueue implements SinkQueue {
  done = false;
  readOldest(): QueueRecord[] {
    return this.done ? [] : [record];
  }
  complete(): { records: number; readings: number; deadLettered: number } {
    this.done = true;
    return { records: 1, readings: 1, deadLettered: 0 };
  }
}

class ScriptedTarget implements SinkTarget {
  readonly name = 'scripted';
  readonly describe = 'a scripted destination';
  readonly attempts: number[] = [];
  constructor(private readonly answers: (() => Delivery)[]) {}
  async deliver(): Promise<Delivery> {
    this.attempts.push(Date.now());
    return this.answers.shift()!();
  }
  async close(): Promise<void> {}
}

let loop: SinkLoop | undefined;
beforeEach(() => vi.useFakeTimers());
afterEach(async () => {
  const stopped = loop?.stop(Date.now() + 100);
  await vi.advanceTimersByTimeAsync(200);
  await stopped;
  vi.useRealTimers();
});

function start(target: ScriptedTarget, queue: SinkQueue, failures: string[]): void {
  loop = new SinkLoop({
    reader: queue,
    target,
    logger: pino({ level: 'silent' }),
    options: { intervalMs: 100, batchReadings: 10, batchBytes: 1 << 20, backoffMaxMs: 1000 },
    events: { delivered: () => undefined, failed: (f) => failures.push(f.message) },
  });
  loop.start();
}

describe('SinkLoop', () => {
  it('waits as long as the destination asked (Retry-After) before the next attempt', async () => {
    const target = new ScriptedTarget([
      () => ({ ok: false, message: '429 Too Many Requests', retryAfterMs: 30_000 }),
      () => ({ ok: true, requests: 1, deadLetters: [] }),
    ]);
    const queue = new OneRecordQueue();
    start(target, queue, []);
    await vi.advanceTimersByTimeAsync(100);
    expect(target.attempts).toHaveLength(1);
    // Far beyond the backoff ceiling (1 s), still short of 30 s: no second attempt yet.
    await vi.advanceTimersByTimeAsync(29_000);
    expect(target.attempts).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1_500);
    expect(target.attempts).toHaveLength(2);
    expect(target.attempts[1]! - target.attempts[0]!).toBeGreaterThanOrEqual(30_000);
    expect(queue.done).toBe(true);
  });

  it('counts a target that throws as a failed attempt and keeps the records', async () => {
    const target = new ScriptedTarget([
      () => {
        throw new Error('socket hang up');
      },
      () => ({ ok: true, requests: 1, deadLetters: [] }),
    ]);
    const queue = new OneRecordQueue();
    const failures: string[] = [];
    start(target, queue, failures);
    await vi.advanceTimersByTimeAsync(100);
    expect(failures).toEqual(['socket hang up']);
    expect(queue.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(queue.done).toBe(true);
  });

  it('counts a delivery the queue could not record (an fsync failed) as a failed attempt and sends the batch again', async () => {
    const target = new ScriptedTarget([
      () => ({ ok: true, requests: 1, deadLetters: [] }),
      () => ({ ok: true, requests: 1, deadLetters: [] }),
    ]);
    const queue = new OneRecordQueue();
    const complete = queue.complete.bind(queue);
    let fsyncs = 0;
    queue.complete = () => {
      if (++fsyncs === 1) throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_FSYNC' });
      return complete();
    };
    const failures: string[] = [];
    start(target, queue, failures);
    await vi.advanceTimersByTimeAsync(100);
    expect(failures).toEqual(['delivered, but the queue could not record it: disk I/O error']);
    expect(queue.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(target.attempts).toHaveLength(2);
    expect(queue.done).toBe(true);
  });
});
