import { describe, expect, it } from 'vitest';
import { CargoHistorySource, historyQuery } from './cargo-history.js';

describe("a ship's cargo history", () => {
  it("asks QuestDB for this site's readings of the ship, ids quoted as SQL string literals", () => {
    const sql = historyQuery({ table: 'cargo_data', site: "o'site" }, "tug 'Hercules'", Date.UTC(2026, 10, 28, 12), 6);
    expect(sql).toBe(
      `SELECT time, cargo_id, avg(value) avg, min(value) min, max(value) max, count() n FROM "cargo_data"` +
        ` WHERE ship_id = 'tug ''Hercules''' AND site = 'o''site' AND time >= '2026-11-28T12:00:00.000Z'` +
        ' SAMPLE BY 5m ALIGN TO CALENDAR ORDER BY time LIMIT 10000',
    );
  });

  it('is off, asking nothing, when the gateway writes to no local QuestDB', async () => {
    expect(await new CargoHistorySource(undefined).read('ship', 6, Date.now())).toEqual({ kind: 'off' });
  });
});
