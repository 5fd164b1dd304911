import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CounterMinutes, MinuteCounts } from './minute-counts.js';
import { RefusalTable } from './refusal-table.js';
import { formatLine, textHash, type QueuedReading } from '../../queue/record-codec.js';
import { propertyRuns } from '../../../test/support/property-sizes.js';
import { recordOf, retainedHeapBytes } from '../../../test/support/retained-heap.js';
import {
  BURST_MS,
  FOLD_AFTER_MS,
  FOLD_AFTER_READINGS,
  FOLD_AFTER_REQUESTS,
  MAX_CARGOS,
  MAX_SHIPS,
  RECENT_MS,
  ShipTable,
} from './ship-table.js';

const T0 = Date.UTC(2026, 10, 26, 10, 0, 0);
const MIN = 60_000;
const reading = (shipId: string, cargoId: string, value: number): QueuedReading => ({ timeNs: `${T0}000000`, shipId, cargoId, value });
/** What ingest hands the table: the readings as the queue record it committed. */
const note = (table: ShipTable, key: string, readings: QueuedReading[], now: number) =>
  table.record(key, readings.map(formatLine).join('\n'), readings.length, now);

describe('minute counts', () => {
  it('keep the last hour in 60 slots, the current minute last, and forget what is older', () => {
    const counts = new MinuteCounts();
    counts.add(5, T0);
    counts.add(2, T0 + 30_000);
    counts.add(7, T0 + 10 * MIN);
    const series = counts.series(T0 + 10 * MIN);
    expect(series).toHaveLength(60);
    expect(series.at(-1)).toBe(7);
    expect(series.at(-11)).toBe(5 + 2);
    expect(counts.total(T0 + 10 * MIN)).toBe(14);
    expect(counts.total(T0 + 60 * MIN)).toBe(7);
    expect(counts.total(T0 + 71 * MIN)).toBe(0);
  });

  it('take readings per minute from a running counter by sampling it', () => {
    let total = 100;
    const minutes = new CounterMinutes(() => total);
    minutes.sample(T0);
    total += 40;
    minutes.sample(T0 + 20_000);
    total += 2;
    expect(minutes.series(T0 + MIN).slice(-2)).toEqual([40, 2]);
  });
});

describe('ship table', () => {
  it('keeps per ship the key, last seen, readings in the last hour and the latest value per cargo', () => {
    const ships = new ShipTable();
    note(ships, 'buoys', [reading('buoy-1', 'level', 1), reading('buoy-1', 'temp', 20), reading('buoy-2', 'level', 3)], T0);
    note(ships, 'buoys', [reading('buoy-1', 'level', 2)], T0 + MIN);
    const [first, second] = ships.list(T0 + MIN);
    expect(first).toMatchObject({ shipId: 'buoy-1', key: 'buoys', lastSeenMs: T0 + MIN, readingsLastHour: 3, stale: false });
    expect(first!.lastValues).toEqual([
      { cargoId: 'level', value: 2 },
      { cargoId: 'temp', value: 20 },
    ]);
    expect(second).toMatchObject({ shipId: 'buoy-2', readingsLastHour: 1 });
  });

  it('reads ship ids and values back from the record exactly as they were accepted', () => {
    const ships = new ShipTable();
    const values = [-0, 0.1 + 0.2, 1e-300, -1.7976931348623157e308, 42];
    note(
      ships,
      'k',
      values.map((v, i) => reading('Schiff «Ü» 1', `c${i}`, v)),
      T0,
    );
    note(ships, 'k', [reading('ab', 'x', 1), reading('abc', 'x', 2), reading('ab', 'y', 3)], T0);
    const ship = ships.list(T0).find((s) => s.shipId === 'Schiff «Ü» 1')!;
    expect(ship.readingsLastHour).toBe(values.length);
    expect(ship.lastValues.map((v) => v.value)).toEqual(values);
    expect(Object.is(ship.lastValues[0]!.value, -0)).toBe(true);
    expect(ships.list(T0).find((s) => s.shipId === 'ab')).toMatchObject({
      readingsLastHour: 2,
      lastValues: [
        { cargoId: 'x', value: 1 },
        { cargoId: 'y', value: 3 },
      ],
    });
    expect(ships.list(T0).find((s) => s.shipId === 'abc')).toMatchObject({ readingsLastHour: 1 });
    expect(ships.size).toBe(3);
  });

  it("reads the same with a batch's values handed beside its record as parsing them from it", () => {
    const parsed = new ShipTable();
    const handed = new ShipTable();
    const values = [-0, 0.1 + 0.2, 1e-300, 42, -7.5, 1e21];
    const readings = values.map((v, i) => reading(`ship-${i % 2}`, `c${i % 3}`, v));
    note(parsed, 'k', readings, T0);
    handed.record(
      'k',
      readings.map(formatLine).join('\n'),
      readings.length,
      T0,
      Float64Array.from(readings, (r) => r.value),
    );
    expect(handed.list(T0)).toEqual(parsed.list(T0));
    expect(Object.is(handed.list(T0).find((s) => s.shipId === 'ship-0')!.lastValues[0]!.value, -0)).toBe(true);
  });

  it('keeps no record alive once folded, however long its ship ids, cargo ids and values', () => {
    const ships = new ShipTable();
    // 20 records of about 1 MB, each of its own ship; ids and values longer than 12 characters.
    const retained = retainedHeapBytes(() => {
      for (let s = 0; s < 20; s++) {
        const record = recordOf(`${T0}000000\tvessel-with-a-long-name-${s}\tcargo-with-a-long-name\t-1.2345678901234568e-300`, 1e6);
        ships.record('k', record, record.split('\n').length, T0);
      }
      expect(ships.size).toBe(20);
    });
    expect(retained).toBeLessThan(4 * 1024 * 1024);
    expect(ships.list(T0)[0]!.lastValues).toEqual([{ cargoId: 'cargo-with-a-long-name', value: -1.2345678901234568e-300 }]);
  });

  it('marks a ship stale after three of its usual gaps, never before 5 minutes', () => {
    const ships = new ShipTable();
    for (let i = 0; i < 5; i++) note(ships, 'k', [reading('slow', 'x', i)], T0 + i * 10 * MIN);
    const last = T0 + 40 * MIN;
    expect(ships.list(last + 29 * MIN)[0]!.stale).toBe(false);
    expect(ships.list(last + 31 * MIN)[0]!.stale).toBe(true);
    note(ships, 'k', [reading('fast', 'x', 1)], T0);
    note(ships, 'k', [reading('fast', 'x', 1)], T0 + 5_000);
    expect(ships.list(T0 + 4 * MIN).find((s) => s.shipId === 'fast')!.stale).toBe(false);
    expect(ships.list(T0 + 6 * MIN).find((s) => s.shipId === 'fast')!.stale).toBe(true);
  });

  it('stays bounded in ships and in cargo ids per ship', () => {
    const ships = new ShipTable({ now: T0 });
    for (let i = 0; i < MAX_SHIPS + 500; i++) note(ships, 'k', [reading(`ship-${i}`, 'x', i)], T0 + i);
    expect(ships.size).toBe(MAX_SHIPS);
    note(
      ships,
      'k',
      Array.from({ length: 100 }, (_, i) => reading('ship-7', `c${i}`, i)),
      T0,
    );
    expect(ships.list(T0).find((s) => s.shipId === 'ship-7')!.lastValues).toHaveLength(MAX_CARGOS);
  });

  it('pushes no live ship off for new ship ids: it leaves them out and says how many readings and which ids', () => {
    const ships = new ShipTable({ now: T0 });
    for (let i = 0; i < MAX_SHIPS; i++) note(ships, 'k', [reading(`real-${i}`, 'x', i)], T0 + i);
    // A key holder floods made-up ids, within the hour the real ships are live.
    for (let i = 0; i < 5000; i++) note(ships, 'k', [reading(`fake-${i}`, 'x', 1), reading(`fake-${i}`, 'y', 2)], T0 + 30 * MIN);
    const listed = new Set(ships.list(T0 + 30 * MIN).map((s) => s.shipId));
    expect(listed.size).toBe(MAX_SHIPS);
    for (let i = 0; i < MAX_SHIPS; i++) expect(listed.has(`real-${i}`)).toBe(true);
    expect(ships.facts()).toMatchObject({
      ships: MAX_SHIPS,
      forgotten: 0,
      leftOutReadings: 10_000,
      leftOutShips: ['fake-4999', 'fake-4998', 'fake-4997', 'fake-4996', 'fake-4995'],
    });
  });

  it('makes room with ships silent for over an hour that the catalogue does not name, the least recently seen first', () => {
    const named = new Set(['named-0', 'named-1']);
    const ships = new ShipTable({ known: (id) => named.has(id), now: T0 });
    note(ships, 'k', [reading('named-0', 'x', 1), reading('named-1', 'x', 1)], T0);
    for (let i = 0; i < MAX_SHIPS - 2; i++) note(ships, 'k', [reading(`old-${i}`, 'x', i)], T0 + i);
    const later = T0 + RECENT_MS + MAX_SHIPS + 1;
    for (let i = 0; i < 10; i++) note(ships, 'k', [reading(`new-${i}`, 'x', i)], later);
    const listed = new Set(ships.list(later).map((s) => s.shipId));
    expect(listed.size).toBe(MAX_SHIPS);
    expect([...listed].filter((id) => id.startsWith('new-'))).toHaveLength(10);
    expect(listed.has('named-0') && listed.has('named-1')).toBe(true);
    for (let i = 0; i < 10; i++) expect(listed.has(`old-${i}`)).toBe(false);
    expect(listed.has('old-10')).toBe(true);
    expect(ships.facts()).toMatchObject({ forgotten: 10, leftOutReadings: 0 });
  });

  it('takes a ship it let go as new when it comes again after the ship it came after before', () => {
    const ships = new ShipTable({ now: T0 });
    note(ships, 'k', [reading('first', 'x', 1), reading('second', 'x', 2)], T0);
    const later = T0 + RECENT_MS + 1;
    for (let i = 0; i < MAX_SHIPS - 2; i++) note(ships, 'k', [reading(`live-${i}`, 'x', i)], later);
    note(ships, 'k', [reading('first', 'x', 3)], later);
    // The table is full: 'second', silent for over an hour, makes room for 'new'.
    note(ships, 'k', [reading('new', 'x', 4)], later);
    expect(ships.get('second', later)).toBeUndefined();
    // No live ship may make room now: 'second' is left out, not counted under the entry it had.
    note(ships, 'k', [reading('first', 'x', 5), reading('second', 'x', 6)], later + 1);
    expect(ships.get('second', later + 1)).toBeUndefined();
    expect(ships.facts()).toMatchObject({ forgotten: 1, leftOutReadings: 1, leftOutShips: ['second'] });
    expect(ships.get('first', later + 1)).toMatchObject({ readingsLastHour: 2, lastValues: [{ cargoId: 'x', value: 5 }] });
  });

  it('lets a ship the catalogue names take the place of a live one it does not name', () => {
    const ships = new ShipTable({ known: (id) => id === 'reefer-ship', now: T0 });
    for (let i = 0; i < MAX_SHIPS; i++) note(ships, 'k', [reading(`live-${i}`, 'x', i)], T0 + i);
    note(ships, 'k', [reading('reefer-ship', 'temp', -20)], T0 + 2 * MIN);
    note(ships, 'k', [reading('stranger', 'temp', 1)], T0 + 2 * MIN);
    const listed = new Set(ships.list(T0 + 2 * MIN).map((s) => s.shipId));
    expect(listed.has('reefer-ship')).toBe(true);
    expect(listed.has('live-0')).toBe(false);
    expect(listed.has('stranger')).toBe(false);
    expect(ships.facts()).toMatchObject({ forgotten: 1, leftOutReadings: 1, leftOutShips: ['stranger'] });
  });

  it('comes back from what it saved as it was, but for the readings per minute, which count again from the start', () => {
    const ships = new ShipTable({ now: T0 - 3 * MIN });
    note(ships, 'buoys', [reading('buoy-1', 'level', 1.5), reading('buoy-1', 'temp', 20)], T0 - MIN);
    note(ships, 'buoys', [reading('buoy-1', 'level', 2.5), reading('buoy-2', 'level', 3)], T0);
    const saved = ships.takeChanges()!;
    expect(ships.takeChanges()).toBeUndefined();
    const again = new ShipTable({ saved: JSON.parse(JSON.stringify(saved)), now: T0 + MIN });
    expect(again.list(T0 + MIN)).toEqual(ships.list(T0 + MIN).map((s) => ({ ...s, readingsLastHour: 0 })));
    expect(again.facts()).toMatchObject({ sinceMs: T0 - 3 * MIN, countingSinceMs: T0 + MIN, ships: 2 });
    expect(again.takeChanges()).toBeUndefined();
    note(again, 'buoys', [reading('buoy-2', 'level', 4)], T0 + MIN);
    expect(again.takeChanges()?.ships.find((s) => s.id === 'buoy-2')?.values).toEqual([['level', 4]]);
  });

  it('reads the same when requests wait to be folded as when each is folded at once', () => {
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const waiting = new ShipTable();
    const folded = new ShipTable();
    let now = T0;
    // Past both fold bounds, with more ships than are kept and more cargo ids than a ship keeps.
    for (let request = 0; request < 3 * FOLD_AFTER_REQUESTS; request++) {
      now += next(3) * 700;
      const readings = Array.from({ length: 1 + (next(10) === 0 ? next(400) : 0) }, () =>
        reading(`ship-${next(MAX_SHIPS + 200)}`, `c${next(MAX_CARGOS + 4)}`, next(1000)),
      );
      const key = `key-${next(3)}`;
      note(waiting, key, readings, now);
      note(folded, key, readings, now);
      expect(folded.size).toBeGreaterThan(0);
    }
    expect(waiting.list(now + MIN)).toEqual(folded.list(now + MIN));
  });

  it('tells apart ship ids and cargo ids whose text hashes alike', () => {
    expect(textHash('Aa', 0, 2)).toBe(textHash('BB', 0, 2));
    const ships = new ShipTable();
    note(
      ships,
      'k',
      [reading('Aa', 'Aa', 1), reading('BB', 'BB', 2), reading('Aa', 'BB', 3), reading('BB', 'Aa', 4), reading('Aa', 'Aa', 5)],
      T0,
    );
    expect(ships.get('Aa', T0)).toMatchObject({
      readingsLastHour: 3,
      lastValues: [
        { cargoId: 'Aa', value: 5 },
        { cargoId: 'BB', value: 3 },
      ],
    });
    expect(ships.get('BB', T0)).toMatchObject({
      readingsLastHour: 2,
      lastValues: [
        { cargoId: 'BB', value: 2 },
        { cargoId: 'Aa', value: 4 },
      ],
    });
  });

  it('lists a ship it let go to make room anew when it is seen again', () => {
    const ships = new ShipTable({ now: T0 });
    for (let i = 1; i < MAX_SHIPS; i++) note(ships, 'k', [reading(`old-${i}`, 'x', i)], T0 + i);
    // The least recently seen ship, folded last.
    note(ships, 'k', [reading('old-0', 'x', 0)], T0);
    expect(ships.size).toBe(MAX_SHIPS);
    const later = T0 + RECENT_MS + MAX_SHIPS + 1;
    note(ships, 'k', [reading('new', 'x', 1)], later);
    expect(ships.get('old-0', later)).toBeUndefined();
    note(ships, 'k', [reading('old-0', 'y', 2)], later);
    expect(ships.get('old-0', later)).toMatchObject({ lastSeenMs: later, readingsLastHour: 1, lastValues: [{ cargoId: 'y', value: 2 }] });
    expect(ships.facts()).toMatchObject({ ships: MAX_SHIPS, forgotten: 2 });
  });

  it('reads as each line of each request taken in turn, ids whose text hashes alike included', () => {
    // Ids of pieces that hash alike in any order ('Aa', 'BB'), beside others, astral ones included.
    const id = fc
      .array(fc.constantFrom('Aa', 'BB', 'x', 'é', '\u{1F6A2}'), { minLength: 1, maxLength: 3 })
      .map((pieces) => pieces.join(''));
    const request = fc.record({
      key: fc.constantFrom('a', 'b'),
      afterMs: fc.constantFrom(0, 1, BURST_MS - 1, BURST_MS, 45_000),
      lines: fc.array(
        fc.record({
          ship: id,
          cargo: id,
          value: fc.double({ noNaN: true, noDefaultInfinity: true }),
          repeat: fc.integer({ min: 1, max: 3 }),
        }),
        {
          minLength: 1,
          maxLength: 40,
        },
      ),
      handed: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(request, { minLength: 1, maxLength: 30 }), (requests) => {
        const table = new ShipTable({ now: T0 });
        /** Each line taken in turn: a ship's entry, its gap, key and count, its cargo ids' latest values in a Map. */
        const model = new Map<
          string,
          { key: string; lastSeenMs: number; gapMs: number | undefined; count: number; values: Map<string, number> }
        >();
        let now = T0;
        for (const { key, afterMs, lines, handed } of requests) {
          now += afterMs;
          const readings = lines.flatMap(({ ship, cargo, value, repeat }) =>
            Array.from({ length: repeat }, () => reading(ship, cargo, value)),
          );
          const record = readings.map(formatLine).join('\n');
          table.record(key, record, readings.length, now, handed ? Float64Array.from(readings, (r) => r.value) : undefined);
          for (const r of readings) {
            let ship = model.get(r.shipId);
            if (ship === undefined) {
              ship = { key, lastSeenMs: now, gapMs: undefined, count: 0, values: new Map() };
              model.set(r.shipId, ship);
            }
            const gap = now - ship.lastSeenMs;
            if (gap >= BURST_MS) ship.gapMs = ship.gapMs === undefined ? gap : ship.gapMs * 0.8 + gap * 0.2;
            ship.lastSeenMs = now;
            ship.key = key;
            ship.count += 1;
            if (!ship.values.has(r.cargoId) && ship.values.size >= MAX_CARGOS) ship.values.delete(ship.values.keys().next().value!);
            ship.values.set(r.cargoId, r.value);
          }
        }
        const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : 1);
        expect(table.takeChanges()?.ships.sort(byId)).toEqual(
          [...model]
            .map(([shipId, s]) => ({
              id: shipId,
              key: s.key,
              lastSeenMs: s.lastSeenMs,
              ...(s.gapMs === undefined ? {} : { gapMs: s.gapMs }),
              values: [...s.values],
            }))
            .sort(byId),
        );
        for (const [shipId, s] of model) expect(table.get(shipId, now)?.readingsLastHour).toBe(s.count);
      }),
      { numRuns: propertyRuns(300) },
    );
  });

  describe('off the request path', () => {
    afterEach(() => vi.useRealTimers());

    it('folds waiting requests on a timer that runs only while some wait', () => {
      vi.useFakeTimers();
      const ships = new ShipTable();
      expect(vi.getTimerCount()).toBe(0);
      note(ships, 'k', [reading('a', 'x', 1)], T0);
      note(ships, 'k', [reading('a', 'x', 2)], T0);
      expect(vi.getTimerCount()).toBe(1);
      vi.advanceTimersByTime(FOLD_AFTER_MS);
      expect(vi.getTimerCount()).toBe(0);
      expect(ships.list(T0)[0]).toMatchObject({ shipId: 'a', readingsLastHour: 2, lastValues: [{ cargoId: 'x', value: 2 }] });
    });

    it('folds at once, leaving no timer, when a bound of waiting readings or requests is reached', () => {
      vi.useFakeTimers();
      const ships = new ShipTable();
      note(
        ships,
        'k',
        Array.from({ length: FOLD_AFTER_READINGS }, (_, i) => reading('a', 'x', i)),
        T0,
      );
      expect(vi.getTimerCount()).toBe(0);
      for (let i = 0; i < FOLD_AFTER_REQUESTS; i++) note(ships, 'k', [reading('b', 'x', i)], T0);
      expect(vi.getTimerCount()).toBe(0);
      expect(ships.list(T0).map((s) => s.readingsLastHour)).toEqual([FOLD_AFTER_READINGS, FOLD_AFTER_REQUESTS]);
    });
  });
});

describe('refusal table', () => {
  it('counts 403 and 422 by key with the latest reason, wrong and missing keys by address, every status for /metrics', () => {
    const table = new RefusalTable();
    const base = { address: '10.0.0.5', message: undefined, missingKey: false };
    table.record({ ...base, status: 403, key: 'crane', message: 'ship not allowed' }, T0);
    table.record({ ...base, status: 422, key: 'crane', message: 'body.value: not a number' }, T0 + 1);
    table.record({ ...base, status: 413, key: 'crane' }, T0 + 2);
    table.record({ ...base, status: 401, key: undefined }, T0 + 3);
    table.record({ ...base, status: 401, key: undefined, missingKey: true }, T0 + 4);
    expect(table.keys()).toEqual([{ key: 'crane', forbidden: 1, invalid: 1, other: 1, last: { atMs: T0 + 2, status: 413, message: '' } }]);
    expect(table.wrongKeys()).toEqual([{ address: '10.0.0.5', wrong: 1, missing: 1, lastMs: T0 + 4 }]);
    expect([...table.byStatus]).toEqual([
      [403, 1],
      [422, 1],
      [413, 1],
      [401, 2],
    ]);
  });

  it('forgets the address that failed least recently past its bound', () => {
    const table = new RefusalTable();
    for (let i = 0; i < 300; i++)
      table.record({ status: 401, key: undefined, address: `10.0.${i >> 8}.${i & 255}`, message: undefined, missingKey: false }, T0 + i);
    const listed = table.wrongKeys();
    expect(listed).toHaveLength(256);
    expect(listed[0]!.address).toBe('10.0.1.43');
  });
});
