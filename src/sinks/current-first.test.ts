import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { QueueReader, type QueueRecord } from '../queue/queue-reader.js';
import { QueueWriter } from '../queue/queue-writer.js';
import type { Delivery, SinkTarget } from './sink.js';
import { SinkLoop } from './sink-loop.js';
import { waitUntil } from '../../test/support/wait.js';

// A current-first sink on a real queue file: after an outage the newest batch goes first, what
// arrives meanwhile next, and the backlog behind them; every reading once, across a restart of the
// delivery in the middle of the catch-up, with the backlog counted right.

class RecordingTarget implements SinkTarget {
  readonly name = 'upstream';
  readonly describe = 'a recording destination';
  readonly sent: number[][] = [];
  /** The link goes down after this many deliveries. */
  downAfter = Number.POSITIVE_INFINITY;
  afterDelivery: (() => Promise<void>) | undefined;
  async deliver(records: readonly QueueRecord[]): Promise<Delivery> {
    if (this.sent.length >= this.downAfter) return { ok: false, message: 'down' };
    this.sent.push(records.map((r) => Number(r.payload.split('\t')[3])));
    await this.afterDelivery?.();
    return { ok: true, requests: 1, deadLetters: [] };
  }
  async close(): Promise<void> {}
}

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0).reverse()) o.close();
});

function sink(dataDir: string, target: RecordingTarget): { reader: QueueReader; loop: SinkLoop } {
  const reader = new QueueReader(dataDir, 'process-crash', 'upstream');
  open.push(reader);
  const loop = new SinkLoop({
    reader,
    target,
    logger: pino({ level: 'silent' }),
    options: { intervalMs: 5, batchReadings: 5, batchBytes: 1 << 20, backoffMaxMs: 20 },
    events: { delivered: () => undefined, failed: () => undefined },
    currentFirst: reader,
  });
  return { reader, loop };
}

describe('current first', () => {
  it('sends the newest batch first, then what came meanwhile, then the backlog, each reading once across a restart', async () => {
    const dataDir = tempDir('current-first');
    const queue = QueueWriter.open({
      dataDir,
      durability: 'process-crash',
      maxBytes: 64 * 1024 * 1024,
      sinks: [
        { name: 'questdb', backfill: true },
        { name: 'upstream', backfill: true },
      ],
    });
    open.push(queue);
    const append = async (from: number, to: number): Promise<void> => {
      for (let i = from; i < to; i++) await queue.append(`${i}\tship\tcargo\t${i}`, 1, 1000 + i);
    };
    await append(0, 23);
    const target = new RecordingTarget();
    // The link returns: after its first delivery, three readings arrive.
    let first = true;
    target.afterDelivery = async () => {
      if (!first) return;
      first = false;
      await append(23, 26);
    };
    target.downAfter = 3;
    const one = sink(dataDir, target);
    one.loop.start();
    await waitUntil('three deliveries', () => one.reader.progress.lastId > 0, 5000);
    await one.loop.stop(Date.now());
    expect(one.reader.ahead).toEqual({ from: { segment: 1, lastId: 18 }, to: { segment: 1, lastId: 26 } });

    // The delivery thread starts again in the middle of the catch-up.
    const restartedTarget = new RecordingTarget();
    const two = sink(dataDir, restartedTarget);
    two.loop.start();
    await waitUntil('caught up', () => two.reader.ahead === undefined && two.reader.readOldest(100, 1 << 20).length === 0, 5000);
    await two.loop.stop(Date.now());

    expect(target.sent[0]).toEqual([18, 19, 20, 21, 22]);
    expect(target.sent[1]).toEqual([23, 24, 25]);
    expect(target.sent[2]).toEqual([0, 1, 2, 3, 4]);
    const all = [...target.sent, ...restartedTarget.sent].flat();
    expect(all.toSorted((a, b) => a - b)).toEqual(Array.from({ length: 26 }, (_, i) => i));
    expect(restartedTarget.sent.flat()).toEqual(Array.from({ length: 13 }, (_, i) => i + 5));
  });

  it('counts a backlog without the records sent ahead after a restart', async () => {
    const dataDir = tempDir('current-first-count');
    const sinks = [{ name: 'upstream', backfill: true }];
    const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 64 * 1024 * 1024, sinks });
    for (let i = 0; i < 20; i++) await queue.append(`${i}\tship\tcargo\t${i}`, 1, 1000 + i);
    const target = new RecordingTarget();
    target.downAfter = 1;
    const one = sink(dataDir, target);
    one.loop.start();
    await waitUntil('the newest batch delivered', () => one.reader.ahead !== undefined, 5000);
    await one.loop.stop(Date.now());
    queue.close();
    expect(target.sent).toEqual([[15, 16, 17, 18, 19]]);
    const reopened = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 64 * 1024 * 1024, sinks });
    open.push(reopened);
    expect(reopened.sinkBacklog('upstream', 0)?.readings).toBe(15);
  });
});
