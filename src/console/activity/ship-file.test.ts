import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readShipFile, shipFile, writeShipFile } from './ship-file.js';
import type { SavedShips } from './ship-table.js';

const dir = mkdtempSync(join(tmpdir(), 'harbor-ship-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const saved: SavedShips = {
  sinceMs: 1_764_000_000_000,
  forgotten: 3,
  leftOutReadings: 12,
  leftOutShips: ['fake-1'],
  ships: [
    { id: 'buoy «1»', key: 'buoys', lastSeenMs: 1_764_000_060_000, gapMs: 10_000, values: [['level', 1.25]] },
    { id: 'mast-2', key: 'default', lastSeenMs: 1_764_000_000_000, values: [] },
  ],
};

describe("the console's ship file", () => {
  it('reads back what was written, in DATA_DIR, with nothing left beside it', () => {
    const path = shipFile(dir);
    expect(path).toBe(join(dir, 'console-ships.json'));
    writeShipFile(path, saved);
    expect(readShipFile(path)).toEqual(saved);
    expect(readdirSync(dir)).toEqual(['console-ships.json']);
  });

  it('is no table when missing, and refused with what is wrong when it is not one', () => {
    expect(readShipFile(join(dir, 'missing.json'))).toBeUndefined();
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ ...saved, version: 1, ships: [{ id: '', key: 'k', lastSeenMs: -1, values: [] }] }));
    expect(() => readShipFile(bad)).toThrow(/ships\.0\.id.*ships\.0\.lastSeenMs/);
    writeFileSync(bad, '{"version":1,');
    expect(() => readShipFile(bad)).toThrow(SyntaxError);
  });
});
