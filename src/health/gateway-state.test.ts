import { describe, expect, it } from 'vitest';
import { describeGatewayState, formatDuration, OutageWatch } from './gateway-state.js';
import type { GatewaySnapshot, SinkSnapshot } from './snapshot.js';
import { healthSnapshot } from '../../test/support/health-snapshot.js';
import { sinkSnapshotOf } from '../../test/support/sink-snapshot.js';

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
    sinks?: SinkSnapshot[];
    heldBy?: string | null;
  } = {},
): GatewaySnapshot {
  const { bytes, oldest, clock, ...same } = change;
  return healthSnapshot({
    ...same,
    queued: 1,
    queueBytes: bytes ?? 0,
    oldestAgeSeconds: oldest ?? null,
    clockSynchronized: clock === undefined ? true : clock,
  });
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
      text: 'refusing readings — QuestDB unreachable for 3 h, queue full',
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

  it("does not call a sink's own flush interval catching up: only a backlog older than that and a minute", () => {
    const sinks = (upstreamAge: number) => [
      sinkSnapshotOf({ name: 'questdb', destination: 'http://localhost:9000', oldestAgeSeconds: 1, backlog: 10 }),
      sinkSnapshotOf({
        name: 'upstream',
        destination: 'https://central.example',
        flushIntervalMs: 600_000,
        oldestAgeSeconds: upstreamAge,
        backlog: 3000,
      }),
    ];
    expect(describeGatewayState(snapshot({ oldest: 590, sinks: sinks(590) }), undefined, now).code).toBe('delivering');
    expect(describeGatewayState(snapshot({ oldest: 700, sinks: sinks(700) }), undefined, now)).toMatchObject({
      code: 'catching_up',
      text: 'catching up — oldest queued reading 11 min old',
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

const sink = sinkSnapshotOf;
const local = sink({ name: 'questdb', destination: 'http://127.0.0.1:9000' });
const upstreamDown = sink({
  name: 'upstream',
  destination: 'https://central.example.com:8443/api/v2/ingest/batch',
  backlog: 900_000,
  consecutiveFailures: 80,
  failingSeconds: 12 * 60 + 5,
  lastError: { at: '2026-11-24T11:59:59Z', message: 'upstream unreachable: connect ECONNREFUSED 10.0.0.9:8443' },
});

describe('the state words of a gateway with remote sinks', () => {
  it('names the sink that holds a full queue and why, while ingest refuses', () => {
    const state = describeGatewayState(
      snapshot({ ready: false, bytes: 99 * MB, sinks: [local, upstreamDown], heldBy: 'upstream' }),
      undefined,
      now,
    );
    expect(state).toMatchObject({
      code: 'refusing',
      text: 'refusing readings — upstream central.example.com:8443 unreachable for 12 min, queue full',
    });
  });

  it('says which remote sink is failing or silent while the site buffers for it', () => {
    const kafka = sink({ name: 'kafka', destination: 'Kafka 10.0.0.5:9092 topic readings', policy: 'drop_oldest', waitingSeconds: 4.2 });
    expect(describeGatewayState(snapshot({ sinks: [local, upstreamDown, kafka], bytes: 60 * MB }), undefined, now).text).toBe(
      'buffering — upstream central.example.com:8443 unreachable for 12 min; Kafka 10.0.0.5:9092 not answering for 4 s, queue 60 % full',
    );
    const refused = sink({ ...upstreamDown, lastError: { at: '2026-11-24T11:59:59Z', message: 'upstream answered 401: Invalid API key' } });
    expect(describeGatewayState(snapshot({ sinks: [local, refused] }), undefined, now).text).toBe(
      'buffering — upstream central.example.com:8443 failing for 12 min',
    );
  });

  it('says a sink holds readings because the destination gives the site to another gateway, and a centre names a site two gateways forward under', () => {
    const held = sink({
      ...upstreamDown,
      lastError: {
        at: '2026-11-24T11:59:59Z',
        message: 'the centre gives site "pier 7" to another gateway; readings of this site stay queued until …',
      },
    });
    expect(describeGatewayState(snapshot({ sinks: [local, held] }), undefined, now).text).toBe(
      'buffering — upstream central.example.com:8443 holds readings: site "pier 7" belongs to another gateway there (rename this one, or release the claim)',
    );
    const centre = snapshot({ sinks: [local] });
    centre.siteClaims = {
      sites: 2,
      conflicts: [
        {
          site: 'pier 7',
          owner: { instance: 'owner1', gateway: null, since: '2026-11-24T10:00:00Z', lastHeard: '2026-11-24T11:59:00Z' },
          claimant: {
            instance: 'clone1',
            gateway: null,
            refusedSince: '2026-11-24T11:00:00Z',
            lastRefused: '2026-11-24T11:59:00Z',
            refusedRequests: 4,
          },
        },
      ],
    };
    expect(describeGatewayState(centre, undefined, now).text).toBe(
      'delivering, site "pier 7" forwarded by two gateways (instance clone1 refused)',
    );
  });

  it("says how far the site's clock is off a destination that told it", () => {
    const kafka = sink({ name: 'kafka', destination: 'Kafka 10.0.0.5:9092 topic readings', clockAheadSeconds: 7200.4 });
    expect(describeGatewayState(snapshot({ sinks: [local, kafka] }), undefined, now).text).toBe(
      'delivering, clock 2 h ahead of Kafka 10.0.0.5:9092',
    );
    const slight = sink({ ...kafka, clockAheadSeconds: -20 });
    expect(describeGatewayState(snapshot({ sinks: [local, slight] }), undefined, now).text).toBe('delivering');
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
