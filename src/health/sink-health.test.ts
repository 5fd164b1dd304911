import { describe, expect, it } from 'vitest';
import { encodeSinkHealth, sinkHealthRow } from './sink-health.js';
import type { SinkSnapshot } from './snapshot.js';
import { sinkSnapshotOf } from '../../test/support/sink-snapshot.js';

const snapshot = (overrides: Partial<SinkSnapshot>): SinkSnapshot =>
  sinkSnapshotOf({
    name: 'remote-questdb',
    destination: 'https://q.example.com',
    policy: 'drop_oldest',
    delivered: 10,
    deliveries: 2,
    ...overrides,
  });

describe('sink health rows', () => {
  it('names the state: failing while attempts fail, waiting while one has no answer, behind while readings wait past the interval, else up to date', () => {
    expect(sinkHealthRow(snapshot({})).state).toBe('up to date');
    // Readings that came since the last send, or held by a long interval by design.
    expect(sinkHealthRow(snapshot({ backlog: 5, oldestAgeSeconds: 3 })).state).toBe('up to date');
    expect(sinkHealthRow(snapshot({ backlog: 5, oldestAgeSeconds: 590, flushIntervalMs: 600_000 })).state).toBe('up to date');
    expect(sinkHealthRow(snapshot({ backlog: 5, oldestAgeSeconds: 62 })).state).toBe('behind');
    expect(sinkHealthRow(snapshot({ backlog: 5, oldestAgeSeconds: 661, flushIntervalMs: 600_000 })).state).toBe('behind');
    expect(sinkHealthRow(snapshot({ backlog: 5, oldestAgeSeconds: 3, waitingSeconds: 4 })).state).toBe('waiting');
    expect(sinkHealthRow(snapshot({ backlog: 5, oldestAgeSeconds: 3, consecutiveFailures: 1, failures: 4 })).state).toBe('failing');
  });

  it('writes one ILP line per sink with escaped tags, integer counters and no age when up to date', () => {
    const rows = [
      sinkHealthRow(snapshot({ name: 'questdb' })),
      sinkHealthRow(snapshot({ backlog: 7, oldestAgeSeconds: 12.5, failures: 3, consecutiveFailures: 3, dropped: 2 })),
    ];
    expect(encodeSinkHealth('site one', rows, 1_700_000_000_000).toString()).toBe(
      'gateway_sink_health,gateway=site\\ one,sink=questdb,state=up\\ to\\ date backlog_readings=0i,delivered_readings=10i,failed_deliveries=0i,dead_lettered=0i,dropped_readings=0i 1700000000000000000n\n' +
        'gateway_sink_health,gateway=site\\ one,sink=remote-questdb,state=failing backlog_readings=7i,delivered_readings=10i,failed_deliveries=3i,dead_lettered=0i,dropped_readings=2i,oldest_age_s=12.5 1700000000000000000n\n',
    );
  });
});
