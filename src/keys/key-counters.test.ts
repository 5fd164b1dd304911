import { describe, expect, it } from 'vitest';
import { KeyCounterTable } from './key-counters.js';

describe('key counters', () => {
  it('list each key with its requests, readings, refusals and the time of its last request', () => {
    const table = new KeyCounterTable();
    table.sync([{ name: 'default' }, { name: 'crane', shipPrefix: 'crane-' }]);
    table.seen('crane', Date.UTC(2026, 10, 26, 13, 0, 0, 123));
    table.accepted('crane', 5);
    table.seen('crane', Date.UTC(2026, 10, 26, 13, 0, 1, 456));
    table.refused('crane');
    expect(table.list()).toEqual([
      { name: 'default', shipPrefix: null, acceptedRequests: 0, acceptedReadings: 0, refusedRequests: 0, lastSeen: null },
      {
        name: 'crane',
        shipPrefix: 'crane-',
        acceptedRequests: 1,
        acceptedReadings: 5,
        refusedRequests: 1,
        lastSeen: '2026-11-26T13:00:01.456Z',
      },
    ]);
  });

  it('keep the counters of keys that stay across a reload and forget revoked keys', () => {
    const table = new KeyCounterTable();
    table.sync([{ name: 'a' }, { name: 'b' }]);
    table.seen('a', 0);
    table.accepted('a', 1);
    table.sync([{ name: 'a', shipPrefix: 'a-' }]);
    expect(table.list()).toEqual([
      { name: 'a', shipPrefix: 'a-', acceptedRequests: 1, acceptedReadings: 1, refusedRequests: 0, lastSeen: '1970-01-01T00:00:00.000Z' },
    ]);
  });
});
