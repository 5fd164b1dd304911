import { describe, expect, it } from 'vitest';
import { describeGatewayState, formatDuration, OutageWatch } from './gateway-state.js';
import type { GatewaySnapshot } from './snapshot.js';

const MB = 1024 * 1024;
const now = Date.parse('2026-11-24T12:00:00Z');

function snapshot(
  change: {
    ready?: boolean;
    bytes?: number;
    oldest?: number | null;
    failures?: number;
    lastErrorAt?: string;
    lastError?: string;
    deadLetters?: number;
    clock?: boolean | null;
  } = {},
): GatewaySnapshot {
  return {
    version: '0.1.0',
    uptimeSeconds: 100,
    durability: 'full',
    ready: change.ready ?? true,
    clockSynchronized: change.clock === undefined ? true : change.clock,
    queue: { records: 1, readings: 1, bytes: change.bytes ?? 0, maxBytes: 100 * MB, commits: 1, oldestAgeSeconds: change.oldest ?? null },
    deadLetters: change.deadLetters ?? 0,
    flush: {
      last: null,
      lastError: change.lastErrorAt === undefined ? null : { at: change.lastErrorAt, message: change.lastError ?? 'connect ECONNREFUSED' },
      consecutiveFailures: change.failures ?? 0,
    },
    sinks: [],
    totals: {
      acceptedRequests: 0,
      acceptedReadings: 0,
      refusedRequests: 0,
      flushes: 0,
      flushFailures: 0,
      flushedReadings: 0,
      deadLettered: 0,
    },
    tls: null,
    keys: [],
    auth: { wrongKeyRequests: 0, addressesTracked: 0 },
    memory: { rssBytes: 0, heapUsedBytes: 0, heapTotalBytes: 0, deliveryHeapUsedBytes: null, deliveryHeapTotalBytes: null },
  };
}

describe('the gateway state in words', () => {
  it('says "delivering" while flushes succeed and the queue is short', () => {
    expect(describeGatewayState(snapshot({ oldest: 2 }), undefined, now)).toEqual({
      code: 'delivering',
      text: 'delivering',
      outageSeconds: null,
    });
  });

  it('says how long QuestDB has been unreachable while readings are buffered', () => {
    const state = describeGatewayState(snapshot({ failures: 40, oldest: 800 }), now - 12 * 60_000 - 5_000, now);
    expect(state).toEqual({ code: 'buffering', text: 'buffering — QuestDB unreachable for 12 min', outageSeconds: 725 });
  });

  it('says when QuestDB answers but its table needs an operator (replaced by an ILP write, or of the wrong shape)', () => {
    const message = 'table cargo_data is not the table the gateway set up and cannot hold readings exactly (no column time)';
    const state = describeGatewayState(
      snapshot({ failures: 5, lastErrorAt: '2026-11-24T11:59:00Z', lastError: message }),
      now - 60_000,
      now,
    );
    expect(state.text).toBe('buffering — the QuestDB table needs an operator for 1 min');
  });

  it('names the queue fill from half full on, and a full queue that refuses readings', () => {
    expect(describeGatewayState(snapshot({ bytes: 80 * MB, failures: 3 }), now - 30_000, now).text).toBe(
      'buffering — QuestDB unreachable for 30 s, queue 80 % full',
    );
    expect(describeGatewayState(snapshot({ bytes: 49 * MB }), undefined, now).text).toBe('delivering');
    expect(describeGatewayState(snapshot({ ready: false, bytes: 99.5 * MB, failures: 9 }), now - 3 * 3_600_000, now)).toMatchObject({
      code: 'refusing',
      text: 'refusing readings — queue full',
    });
    expect(describeGatewayState(snapshot({ ready: false }), undefined, now).text).toBe(
      'refusing readings — stopping, or queue disk failing',
    );
  });

  it('says "catching up" when flushes succeed but the oldest queued reading is over a minute old', () => {
    expect(describeGatewayState(snapshot({ oldest: 190 }), undefined, now)).toMatchObject({
      code: 'catching_up',
      text: 'catching up — oldest queued reading 3 min old',
    });
  });

  it('adds dead letters and an unsynchronised clock, and stays silent about a clock it cannot know', () => {
    expect(describeGatewayState(snapshot({ deadLetters: 1, clock: false }), undefined, now).text).toBe(
      'delivering, 1 dead letter, clock not synchronised',
    );
    expect(describeGatewayState(snapshot({ deadLetters: 3, clock: null }), undefined, now).text).toBe('delivering, 3 dead letters');
  });

  it('writes durations in the largest units that read well', () => {
    expect([0, 59.6, 60, 725, 3600, 3660 * 2, 47 * 3600, 49 * 3600].map(formatDuration)).toEqual([
      '0 s',
      '1 min',
      '1 min',
      '12 min',
      '1 h',
      '2 h 2 min',
      '47 h',
      '2 d',
    ]);
  });
});

describe('timing an outage across reports', () => {
  it('keeps the start of a run of failures until a flush succeeds', () => {
    const watch = new OutageWatch();
    expect(watch.observe(snapshot(), now)).toBeUndefined();
    const firstSeen = watch.observe(snapshot({ failures: 1, lastErrorAt: new Date(now - 4_000).toISOString() }), now);
    expect(firstSeen).toBe(now - 4_000);
    expect(watch.observe(snapshot({ failures: 7, lastErrorAt: new Date(now + 50_000).toISOString() }), now + 60_000)).toBe(now - 4_000);
    expect(watch.observe(snapshot({ failures: 0 }), now + 70_000)).toBeUndefined();
    expect(watch.observe(snapshot({ failures: 1 }), now + 80_000)).toBe(now + 80_000);
  });
});
