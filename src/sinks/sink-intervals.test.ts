import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { problemsOf } from '../../test/support/config-problems.js';
import { loadConfig } from '../config/config.js';
import type { Progress } from '../queue/queue-file.js';
import type { QueueRecord } from '../queue/queue-reader.js';
import { sinkLoopOptions } from './delivery-worker.js';
import type { SinkSpec } from './registry.js';
import type { Delivery, SinkTarget } from './sink.js';
import { SinkLoop, type SinkQueue } from './sink-loop.js';
import { sinkSpecs } from './sink-specs.js';
import { SinkWakes } from './sink-wakes.js';

// Each sink's flush interval, from its settings to its loop, on fake timers: a site's devices send a
// round of readings every 5 s; the local QuestDB keeps FLUSH_INTERVAL_MS however long a remote sink
// gathers readings, and a whole batch of a sink's own goes at once.

const FORWARDING = {
  UPSTREAM_URL: 'https://central.example.com:8443/api/v2/ingest/batch',
  UPSTREAM_API_KEY: 'upstream-key-0123456789',
  KAFKA_BROKERS: 'kafka.example.com:9092',
  REMOTE_QUESTDB_URL: 'https://questdb.example.com:9000',
};

const intervals = (env: Record<string, string>) =>
  Object.fromEntries(sinkSpecs(loadConfig({ ...FORWARDING, ...env })).map((s) => [s.name, s.flushIntervalMs]));

/** The site's queue as one sink reads it: every record appended so far, after the sink's mark (or `from`). */
class SiteQueue implements SinkQueue {
  mark = 0;
  constructor(readonly records: QueueRecord[]) {}
  readOldest(maxReadings = Number.POSITIVE_INFINITY, _maxBytes?: number, from?: Progress): QueueRecord[] {
    const after = from?.lastId ?? this.mark;
    const batch: QueueRecord[] = [];
    let readings = 0;
    for (const r of this.records) {
      if (r.id <= after || readings >= maxReadings) continue;
      batch.push(r);
      readings += r.readings;
    }
    return batch;
  }
  complete(records: readonly QueueRecord[]): { records: number; readings: number; deadLettered: number } {
    this.mark = records.at(-1)!.id;
    return { records: records.length, readings: records.reduce((sum, r) => sum + r.readings, 0), deadLettered: 0 };
  }
}

/** Takes every batch, noting when and which records. */
class Destination implements SinkTarget {
  readonly describe = 'a destination';
  readonly deliveries: { at: number; ids: number[] }[] = [];
  constructor(readonly name: string) {}
  async deliver(records: readonly QueueRecord[]): Promise<Delivery> {
    this.deliveries.push({ at: Date.now(), ids: records.map((r) => r.id) });
    return { ok: true, requests: 1, deadLetters: [] };
  }
  async close(): Promise<void> {}
}

const ROUND_MS = 5000;
/** Readings in a round of the site: 6 ships of 14. */
const ROUND_READINGS = 84;

interface Site {
  records: QueueRecord[];
  sinks: Map<string, { loop: SinkLoop; destination: Destination }>;
  wakes: SinkWakes;
  appended: number;
  /** A round of the devices: one record, committed, with the wakes ingest sends after a commit. */
  round(): void;
}

let site: Site | undefined;
beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(async () => {
  const stopping = [...(site?.sinks.values() ?? [])].map((s) => s.loop.stop(Date.now() + 100));
  await vi.advanceTimersByTimeAsync(200);
  await Promise.all(stopping);
  site = undefined;
  vi.useRealTimers();
});

/** The sinks `env` configures, each on its own loop as the delivery thread makes it, over one queue. */
function startSite(env: Record<string, string>, only?: string[]): Site {
  const specs = sinkSpecs(loadConfig({ ...FORWARDING, ...env })).filter((s) => only === undefined || only.includes(s.name));
  const records: QueueRecord[] = [];
  const wakes = new SinkWakes(specs.map((s) => s.batchReadings));
  const sinks = new Map(
    specs.map((spec: SinkSpec, index) => {
      const destination = new Destination(spec.name);
      const loop = new SinkLoop({
        reader: new SiteQueue(records),
        target: destination,
        logger: pino({ level: 'silent' }),
        options: sinkLoopOptions(spec, { batchBytes: 1 << 30, backoffMaxMs: 30_000 }),
        events: { delivered: () => undefined, failed: () => undefined },
        // Without the QuestDB sinks' replay windows, whose checks have their own tests.
        reading: () => wakes.reading(index),
      });
      loop.start();
      return [spec.name, { loop, destination }] as const;
    }),
  );
  const names = specs.map((s) => s.name);
  const started: Site = {
    records,
    sinks,
    wakes,
    appended: 0,
    round() {
      const id = records.length + 1;
      records.push({ segment: 1, id, receivedMs: Date.now(), readings: ROUND_READINGS, bytes: ROUND_READINGS * 50, payload: '' });
      started.appended += ROUND_READINGS;
      for (const index of wakes.appended(started.appended) ?? []) sinks.get(names[index]!)!.loop.wake();
    },
  };
  site = started;
  return started;
}

/** Runs the site's devices for `rounds` rounds, the first `offsetMs` in. */
async function runRounds(s: Site, rounds: number, offsetMs = ROUND_MS / 2): Promise<void> {
  await vi.advanceTimersByTimeAsync(offsetMs);
  for (let i = 0; i < rounds; i++) {
    s.round();
    await vi.advanceTimersByTimeAsync(ROUND_MS);
  }
}

const deliveriesOf = (s: Site, sink: string) => s.sinks.get(sink)!.destination.deliveries;

describe('flush intervals per sink', () => {
  it('give each remote sink its own setting, FLUSH_INTERVAL_MS where it has none, and the local QuestDB FLUSH_INTERVAL_MS always', () => {
    expect(intervals({})).toEqual({ questdb: 1000, 'remote-questdb': 1000, upstream: 1000, kafka: 1000 });
    expect(
      intervals({
        FLUSH_INTERVAL_MS: '500',
        UPSTREAM_FLUSH_INTERVAL_MS: '20000',
        KAFKA_FLUSH_INTERVAL_MS: '10000',
        REMOTE_QUESTDB_FLUSH_INTERVAL_MS: '5000',
      }),
    ).toEqual({ questdb: 500, 'remote-questdb': 5000, upstream: 20_000, kafka: 10_000 });
    expect(intervals({ UPSTREAM_FLUSH_INTERVAL_MS: '20000' })).toEqual({
      questdb: 1000,
      'remote-questdb': 1000,
      upstream: 20_000,
      kafka: 1000,
    });
    expect(problemsOf({ ...FORWARDING, UPSTREAM_FLUSH_INTERVAL_MS: '5', KAFKA_FLUSH_INTERVAL_MS: 'soon' })).toEqual([
      'UPSTREAM_FLUSH_INTERVAL_MS must be at least 10 (got "5")',
      'KAFKA_FLUSH_INTERVAL_MS must be a whole number (got "soon")',
    ]);
  });

  it('deliver each round to the local QuestDB within its second while the upstream sends four rounds a request, one every 20 s', async () => {
    const s = startSite({ UPSTREAM_FLUSH_INTERVAL_MS: '20000' }, ['questdb', 'upstream']);
    await runRounds(s, 12);
    // Rounds at 2.5 s, 7.5 s, … 57.5 s.
    const local = deliveriesOf(s, 'questdb');
    expect(local.map((d) => d.ids)).toEqual(s.records.map((r) => [r.id]));
    for (const [i, d] of local.entries()) expect(d.at - s.records[i]!.receivedMs).toBeLessThanOrEqual(1000);
    expect(deliveriesOf(s, 'upstream')).toEqual([
      { at: 20_000, ids: [1, 2, 3, 4] },
      { at: 40_000, ids: [5, 6, 7, 8] },
      { at: 60_000, ids: [9, 10, 11, 12] },
    ]);
  });

  it('keep each remote sink to its own interval, side by side', async () => {
    const s = startSite({
      UPSTREAM_FLUSH_INTERVAL_MS: '20000',
      KAFKA_FLUSH_INTERVAL_MS: '10000',
      REMOTE_QUESTDB_FLUSH_INTERVAL_MS: '30000',
    });
    await runRounds(s, 12);
    const times = (sink: string) => deliveriesOf(s, sink).map((d) => d.at);
    expect(times('upstream')).toEqual([20_000, 40_000, 60_000]);
    expect(times('kafka')).toEqual([10_000, 20_000, 30_000, 40_000, 50_000, 60_000]);
    expect(times('remote-questdb')).toEqual([30_000, 60_000]);
    expect(times('questdb')).toHaveLength(12);
  });

  it('send a whole batch of its own at once, whatever the interval, and wake no other sink for it', async () => {
    // Upstream batches of 168 readings (two rounds); Kafka's batch is 20,000.
    const s = startSite({ UPSTREAM_FLUSH_INTERVAL_MS: '60000', UPSTREAM_BATCH_READINGS: '168', KAFKA_FLUSH_INTERVAL_MS: '60000' }, [
      'questdb',
      'upstream',
      'kafka',
    ]);
    await runRounds(s, 6);
    // Two rounds since each read make a whole upstream batch: it goes with the second round.
    expect(deliveriesOf(s, 'upstream')).toEqual([
      { at: 7_500, ids: [1, 2] },
      { at: 17_500, ids: [3, 4] },
      { at: 27_500, ids: [5, 6] },
    ]);
    expect(deliveriesOf(s, 'kafka')).toEqual([]);
    await vi.advanceTimersByTimeAsync(60_000 - 32_500);
    expect(deliveriesOf(s, 'kafka')).toEqual([{ at: 60_000, ids: [1, 2, 3, 4, 5, 6] }]);
  });

  it('hold no stop back: what a long interval gathered goes at once', async () => {
    const s = startSite({ UPSTREAM_FLUSH_INTERVAL_MS: '3600000' }, ['questdb', 'upstream']);
    await runRounds(s, 3);
    expect(deliveriesOf(s, 'upstream')).toEqual([]);
    const upstream = s.sinks.get('upstream')!;
    const stopped = upstream.loop.stop(Date.now() + 10_000);
    await vi.advanceTimersByTimeAsync(0);
    await stopped;
    expect(deliveriesOf(s, 'upstream')).toEqual([{ at: 17_500, ids: [1, 2, 3] }]);
  });
});
