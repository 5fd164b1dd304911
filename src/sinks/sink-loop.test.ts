import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Progress } from '../queue/queue-file.js';
import type { QueueRecord } from '../queue/queue-reader.js';
import type { Delivery, Recovery, SinkTarget } from './sink.js';
import { type ReplaySettings, STALL_NOTICE_MS, SinkLoop, type SinkEvents, type SinkQueue } from './sink-loop.js';
import { AppendSignal } from './append-signal.js';

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

/** Records of one reading each in memory, read from a mark (or `from`); complete() moves it and counts what it passed. */
class ListQueue implements SinkQueue {
  mark = 0;
  constructor(readonly records: QueueRecord[]) {}
  readOldest(maxReadings = Number.POSITIVE_INFINITY, _maxBytes?: number, from?: Progress): QueueRecord[] {
    const after = from?.lastId ?? this.mark;
    return this.records.filter((r) => r.id > after).slice(0, maxReadings);
  }
  complete(records: readonly QueueRecord[]): { records: number; readings: number; deadLettered: number } {
    this.mark = records.at(-1)!.id;
    return { records: records.length, readings: records.reduce((sum, r) => sum + r.readings, 0), deadLettered: 0 };
  }
}

class ScriptedTarget implements SinkTarget {
  readonly name = 'scripted';
  readonly describe = 'a scripted destination';
  readonly attempts: number[] = [];
  readonly sent: QueueRecord[][] = [];
  constructor(private readonly answers: (() => Delivery | Promise<Delivery>)[]) {}
  async deliver(records: readonly QueueRecord[]): Promise<Delivery> {
    this.attempts.push(Date.now());
    this.sent.push([...records]);
    return this.answers.shift()!();
  }
  async close(): Promise<void> {}
}

let loop: SinkLoop | undefined;
beforeEach(() => vi.useFakeTimers());
afterEach(async () => {
  const stopped = loop?.stop(Date.now() + 100);
  if (vi.isFakeTimers()) await vi.advanceTimersByTimeAsync(200);
  await stopped;
  vi.useRealTimers();
});

function start(target: ScriptedTarget, queue: SinkQueue, failures: string[], events: Partial<SinkEvents> = {}): void {
  loop = new SinkLoop({
    reader: queue,
    target,
    logger: pino({ level: 'silent' }),
    options: { intervalMs: 100, batchReadings: 10, batchBytes: 1 << 20, backoffMaxMs: 1000 },
    events: { delivered: () => undefined, failed: (f) => failures.push(f.message), ...events },
  });
  loop.start();
}

/** A loop that sleeps while the queue is empty, woken by `appended`. */
function startSignalled(target: ScriptedTarget, queue: SinkQueue, appended: AppendSignal, replay?: ReplaySettings): void {
  loop = new SinkLoop({
    reader: queue,
    target,
    logger: pino({ level: 'silent' }),
    options: { intervalMs: 50, batchReadings: 10, batchBytes: 1 << 20, backoffMaxMs: 1000 },
    events: { delivered: () => undefined, failed: () => undefined },
    appended,
    ...(replay === undefined ? {} : { replay }),
  });
  loop.start();
}

/** A loop with an interval of an hour and batches of 10 readings: only a wake makes it deliver soon. */
function startPatient(target: ScriptedTarget, queue: SinkQueue, appended?: AppendSignal): SinkLoop {
  const patient = new SinkLoop({
    reader: queue,
    target,
    logger: pino({ level: 'silent' }),
    options: { intervalMs: 3_600_000, batchReadings: 10, batchBytes: 1 << 20, backoffMaxMs: 1000 },
    events: { delivered: () => undefined, failed: () => undefined },
    ...(appended === undefined ? {} : { appended }),
  });
  loop = patient;
  patient.start();
  return patient;
}

const ok = (): Delivery => ({ ok: true, requests: 1, deadLetters: [] });

/** A destination with a replay window: every check is recorded (its time) and finds the table as needed. */
class CheckedTarget extends ScriptedTarget {
  readonly checks: number[] = [];
  async recover(): Promise<Recovery> {
    this.checks.push(performance.now());
    return { ok: true, resumed: false };
  }
}

const requeued = (id: number, sink?: string): QueueRecord => ({ ...record, id, ...(sink === undefined ? {} : { sink }) });

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

  it('delivers a dead letter re-queued for it, passes one re-queued for another sink, and counts neither twice', async () => {
    const target = new ScriptedTarget([() => ({ ok: true, requests: 1, deadLetters: [] })]);
    const queue = new ListQueue([requeued(1), requeued(2, 'kafka'), requeued(3, 'scripted')]);
    const delivered: { delivered: number; passed: number; readings: number }[] = [];
    const passed: number[] = [];
    start(target, queue, [], { delivered: (d) => delivered.push(d), passed: (n) => passed.push(n) });
    await vi.advanceTimersByTimeAsync(100);
    expect(target.sent.map((batch) => batch.map((r) => r.id))).toEqual([[1, 3]]);
    expect(delivered).toEqual([expect.objectContaining({ delivered: 2, passed: 1, readings: 3 })]);
    expect(queue.mark).toBe(3);

    // A batch of other sinks' records only: passed, never sent.
    queue.records.push(requeued(4, 'upstream'));
    await vi.advanceTimersByTimeAsync(200);
    expect(target.sent).toHaveLength(1);
    expect(passed).toEqual([1]);
    expect(queue.mark).toBe(4);
  });

  it(`reports an attempt without an answer after ${STALL_NOTICE_MS} ms, long before the destination's timeout`, async () => {
    let answer: (delivery: Delivery) => void = () => undefined;
    const target = new ScriptedTarget([() => new Promise<Delivery>((resolve) => (answer = resolve))]);
    const waiting: number[] = [];
    start(target, new OneRecordQueue(), [], { waiting: (since) => waiting.push(since) });
    await vi.advanceTimersByTimeAsync(100);
    const began = Date.now();
    await vi.advanceTimersByTimeAsync(STALL_NOTICE_MS - 10);
    expect(waiting).toEqual([]);
    await vi.advanceTimersByTimeAsync(20);
    expect(waiting).toEqual([began]);
    answer({ ok: true, requests: 1, deadLetters: [] });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(waiting).toHaveLength(1);
  });

  it('reads an empty queue once, then sleeps until ingest commits, and delivers an interval after the commit', async () => {
    // Atomics.waitAsync wakes through the event loop, which fake timers do not drive.
    vi.useRealTimers();
    const queue = new ListQueue([]);
    let reads = 0;
    const read = queue.readOldest.bind(queue);
    queue.readOldest = () => {
      reads += 1;
      return read();
    };
    const target = new ScriptedTarget([() => ({ ok: true, requests: 1, deadLetters: [] })]);
    const appended = new AppendSignal();
    startSignalled(target, queue, appended);
    await new Promise((r) => setTimeout(r, 400));
    expect(reads).toBe(1);
    queue.records.push(requeued(1));
    const committed = Date.now();
    appended.appended();
    await vi.waitFor(() => expect(target.sent).toHaveLength(1), { timeout: 2000, interval: 10 });
    expect(target.attempts[0]! - committed).toBeGreaterThanOrEqual(45);
    expect(reads).toBe(2);
  });

  it('with readings kept and nothing new delivered, checks once soon after the delivery, then not until the kept readings may go', async () => {
    vi.useRealTimers();
    const queue = new ListQueue([requeued(1)]);
    let reads = 0;
    const read = queue.readOldest.bind(queue);
    queue.readOldest = () => {
      reads += 1;
      return read();
    };
    const target = new CheckedTarget([
      () => ({ ok: true, requests: 1, deadLetters: [] }),
      () => ({ ok: true, requests: 1, deadLetters: [] }),
    ]);
    const appended = new AppendSignal();
    const [checkMs, windowMs] = [200, 1_000];
    const kept: unknown[] = [];
    const keptQueue = { cursor: { segment: 1, lastId: 1 }, keep: (at: unknown) => void kept.push(at), replay: () => 0 };
    startSignalled(target, queue, appended, { windowMs, checkMs, queue: keptQueue });
    await new Promise((r) => setTimeout(r, 1_600));
    expect(target.sent).toHaveLength(1);
    // The check before the first delivery, one checkMs after it, and one when the window let the
    // reading go: none in between, and none once nothing is kept.
    expect(target.checks).toHaveLength(3);
    const [first, afterDelivery, release] = target.checks as [number, number, number];
    expect(afterDelivery - first).toBeGreaterThanOrEqual(checkMs);
    expect(afterDelivery - first).toBeLessThan(checkMs + 150);
    expect(release - first).toBeGreaterThanOrEqual(windowMs);
    expect(release - first).toBeLessThan(windowMs + 150);
    expect(kept).toEqual([keptQueue.cursor]);
    expect(reads).toBeLessThanOrEqual(target.checks.length + 2);
    // A reading committed meanwhile goes an interval later, not at the next check.
    queue.records.push(requeued(2));
    const committed = performance.now();
    appended.appended();
    await vi.waitFor(() => expect(target.sent).toHaveLength(2), { timeout: 2000, interval: 5 });
    expect(performance.now() - committed).toBeLessThan(checkMs - 50);
  });

  it('while deliveries go on, checks the destination every checkMs', async () => {
    vi.useRealTimers();
    const queue = new ListQueue([]);
    const target = new CheckedTarget(Array.from({ length: 20 }, () => () => ({ ok: true, requests: 1, deadLetters: [] })));
    const appended = new AppendSignal();
    const checkMs = 300;
    const keptQueue = { cursor: { segment: 1, lastId: 1 }, keep: () => undefined, replay: () => 0 };
    startSignalled(target, queue, appended, { windowMs: 60_000, checkMs, queue: keptQueue });
    for (let id = 1; id <= 14; id++) {
      queue.records.push(requeued(id));
      appended.appended();
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(target.sent.length).toBeGreaterThanOrEqual(10);
    expect(target.checks.length).toBeGreaterThanOrEqual(4);
    for (let i = 1; i < target.checks.length; i++) {
      expect(target.checks[i]! - target.checks[i - 1]!).toBeGreaterThanOrEqual(checkMs);
      expect(target.checks[i]! - target.checks[i - 1]!).toBeLessThan(checkMs + 150);
    }
  });

  it('delivers what ingest commits after a whole batch whose read-ahead found nothing', async () => {
    vi.useRealTimers();
    // Exactly one batch (10 readings): the read made while it was on its way finds the queue empty.
    const queue = new ListQueue(Array.from({ length: 10 }, (_, i) => requeued(i + 1)));
    const target = new ScriptedTarget(Array.from({ length: 2 }, () => () => ({ ok: true, requests: 1, deadLetters: [] })));
    const appended = new AppendSignal();
    startSignalled(target, queue, appended);
    await vi.waitFor(() => expect(target.sent).toHaveLength(1), { timeout: 1000, interval: 10 });
    await new Promise((r) => setTimeout(r, 200));
    queue.records.push(requeued(11));
    appended.appended();
    await vi.waitFor(() => expect(target.sent).toHaveLength(2), { timeout: 1000, interval: 10 });
    expect(target.sent[1]!.map((r) => r.id)).toEqual([11]);
  });

  it('delivers a whole batch at once when the wake comes while it waits for a commit, not an interval later', async () => {
    vi.useRealTimers();
    const queue = new ListQueue([]);
    const target = new ScriptedTarget([ok]);
    const appended = new AppendSignal();
    const patient = startPatient(target, queue, appended);
    patient.wake();
    // The first read found nothing: the loop waits for a commit.
    await new Promise((r) => setTimeout(r, 100));
    queue.records.push(...Array.from({ length: 10 }, (_, i) => requeued(i + 1)));
    // Ingest's wake may reach the loop before the commit's count does.
    patient.wake();
    appended.appended();
    await vi.waitFor(() => expect(target.sent).toHaveLength(1), { timeout: 2000, interval: 10 });
    expect(target.sent[0]).toHaveLength(10);
  });

  it('keeps a wake that comes while a delivery is under way: the whole batch goes right after it', async () => {
    let answer: (delivery: Delivery) => void = () => undefined;
    const target = new ScriptedTarget([() => new Promise<Delivery>((resolve) => (answer = resolve)), ok]);
    const queue = new ListQueue([requeued(1)]);
    const patient = startPatient(target, queue);
    patient.wake();
    await vi.advanceTimersByTimeAsync(0);
    expect(target.sent).toHaveLength(1);
    queue.records.push(...Array.from({ length: 10 }, (_, i) => requeued(i + 2)));
    patient.wake();
    await vi.advanceTimersByTimeAsync(500);
    answer(ok());
    await vi.advanceTimersByTimeAsync(1);
    expect(target.sent.map((batch) => batch.length)).toEqual([1, 10]);
  });

  it('keeps a wake that comes while a retry after a failure is under way', async () => {
    let answer: (delivery: Delivery) => void = () => undefined;
    const target = new ScriptedTarget([
      () => ({ ok: false, message: 'unreachable' }),
      () => new Promise<Delivery>((resolve) => (answer = resolve)),
      ok,
    ]);
    const queue = new ListQueue([requeued(1)]);
    const patient = startPatient(target, queue);
    patient.wake();
    await vi.advanceTimersByTimeAsync(0);
    // The retry comes after the backoff (250 ms at most), and is on its way.
    await vi.advanceTimersByTimeAsync(250);
    expect(target.attempts).toHaveLength(2);
    queue.records.push(...Array.from({ length: 10 }, (_, i) => requeued(i + 2)));
    patient.wake();
    answer(ok());
    await vi.advanceTimersByTimeAsync(1);
    expect(target.sent.map((batch) => batch.length)).toEqual([1, 1, 10]);
  });

  it('retries a failed delivery after its backoff, never an interval, and a wake meanwhile does not cut the backoff short', async () => {
    let answer: (delivery: Delivery) => void = () => undefined;
    const target = new ScriptedTarget([
      () => new Promise<Delivery>((resolve) => (answer = resolve)),
      () => ({ ok: false, message: 'unreachable' }),
      ok,
      ok,
    ]);
    const queue = new ListQueue([requeued(1)]);
    const patient = startPatient(target, queue);
    patient.wake();
    await vi.advanceTimersByTimeAsync(0);
    // A whole batch arrives while the attempt is on its way, and the attempt fails.
    queue.records.push(...Array.from({ length: 10 }, (_, i) => requeued(i + 2)));
    patient.wake();
    answer({ ok: false, message: 'unreachable' });
    await vi.advanceTimersByTimeAsync(0);
    // The second attempt fails too, and a wake comes during its backoff.
    await vi.waitFor(() => expect(target.attempts).toHaveLength(2), { timeout: 1000, interval: 1 });
    await vi.advanceTimersByTimeAsync(1);
    patient.wake();
    await vi.advanceTimersByTimeAsync(1000);
    expect(target.attempts).toHaveLength(4);
    const [first, second, third] = target.attempts as [number, number, number];
    // Backoffs from 250 ms, doubling, each between half and all of it.
    expect(second - first).toBeGreaterThanOrEqual(125);
    expect(third - second).toBeGreaterThanOrEqual(250);
    expect(third - first).toBeLessThan(750);
    expect(queue.mark).toBe(11);
  });

  it('sees a commit made between its read of the queue and its sleep', async () => {
    vi.useRealTimers();
    const appended = new AppendSignal();
    const queue = new ListQueue([]);
    const read = queue.readOldest.bind(queue);
    let first = true;
    queue.readOldest = () => {
      const records = read();
      // Ingest commits right after the read found nothing, before the loop goes to sleep.
      if (first) {
        first = false;
        queue.records.push(requeued(1));
        appended.appended();
      }
      return records;
    };
    const target = new ScriptedTarget([() => ({ ok: true, requests: 1, deadLetters: [] })]);
    startSignalled(target, queue, appended);
    await vi.waitFor(() => expect(target.sent).toHaveLength(1), { timeout: 1000, interval: 10 });
  });
});
