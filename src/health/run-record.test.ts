import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { RUN_RECORD_FILE, readRunRecord, startEvents, writeRunRecord } from './run-record.js';

const at = Date.parse('2026-11-26T10:00:00Z');
const minutes = (n: number) => n * 60_000;

describe('the run record and the start it words', () => {
  it('keeps the previous run in the data directory, and reads a damaged record as none', () => {
    const dir = tempDir('run-record');
    expect(readRunRecord(dir)).toBeUndefined();
    const record = { gateway: 'gw', version: '0.5.0', started: at, stopped: null, stopReason: null };
    writeRunRecord(dir, record);
    expect(readRunRecord(dir)).toEqual(record);
    writeFileSync(join(dir, RUN_RECORD_FILE), '{"gateway":');
    expect(readRunRecord(dir)).toBeUndefined();
  });

  it('tells a first start, an upgrade, a restart, a failed start and an unclean stop apart', () => {
    const current = { gateway: 'gw', version: '0.5.0', at };
    const previous = { gateway: 'gw', version: '0.5.0', started: at - minutes(600), stopped: at - minutes(2), stopReason: 'restart' };
    expect(startEvents(undefined, current)).toEqual([
      {
        time: at,
        event: 'started',
        reason: 'first_start',
        text: 'started 0.5.0 (no earlier run on this data directory)',
        version: '0.5.0',
      },
    ]);
    expect(startEvents(previous, current).map((e) => [e.reason, e.text])).toEqual([
      ['restart', 'started 0.5.0 after a restart, down 2 min'],
    ]);
    expect(startEvents({ ...previous, version: '0.4.0', stopReason: 'upgrade' }, current).map((e) => [e.reason, e.text])).toEqual([
      ['upgrade', 'started 0.5.0 after an upgrade from 0.4.0, down 2 min'],
    ]);
    // A stop announced as an upgrade that left the version as it was is no upgrade.
    expect(startEvents({ ...previous, stopReason: 'upgrade' }, current).map((e) => [e.reason, e.text])).toEqual([
      ['restart', 'started 0.5.0 after a restart (stopped for an upgrade; the version is the same), down 2 min'],
    ]);
    expect(startEvents({ ...previous, stopReason: 'failed_start' }, current).map((e) => [e.reason, e.text])).toEqual([
      ['failed_start', 'started 0.5.0 after a failed start, down 2 min'],
    ]);
    expect(startEvents({ ...previous, stopped: null, stopReason: null }, current).map((e) => [e.reason, e.text])).toEqual([
      ['crash', 'started 0.5.0 after an unclean stop (crash, kill or power cut) of a run begun 10 h before'],
    ]);
  });

  it('retires the previous name when GATEWAY_NAME changed', () => {
    const previous = { gateway: 'old-name', version: '0.5.0', started: at - minutes(60), stopped: at - minutes(1), stopReason: 'stop' };
    expect(startEvents(previous, { gateway: 'quay-3', version: '0.5.0', at })).toEqual([
      { time: at, gateway: 'old-name', event: 'retired', reason: 'renamed', text: 'renamed to quay-3', version: '0.5.0' },
      { time: at, event: 'started', reason: 'stop', text: 'started 0.5.0 after a stop, down 1 min', version: '0.5.0' },
    ]);
  });
});
