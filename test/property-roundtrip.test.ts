import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyCodePoint } from './support/code-points.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ MAX_ID_LENGTH: '100' });
});
afterAll(() => gw.stop());

const DAY_NS = 86_400_000_000_000n;
// Recent days, so the property does not depend on the date the suite runs.
const BASE_NS = (BigInt(Date.now()) / 86_400_000n - 60n) * DAY_NS;

/** Any id the schema accepts: 1-100 code points from all of Unicode, no control characters. */
const id = fc.string({ unit: anyCodePoint, minLength: 1, maxLength: 100 }).filter((s) => !/\p{Cc}/u.test(s));

/** A timestamp inside one day, to be written with 0, 3, 6 or 9 fraction digits and any offset. */
const timestamp = fc.record({
  offsetNs: fc.bigInt({ min: 0n, max: DAY_NS - 1n }),
  digits: fc.constantFrom(0, 3, 6, 9),
  offsetMinutes: fc.integer({ min: -23 * 60 - 59, max: 23 * 60 + 59 }),
});

/** The timestamp inside day `day` after BASE_NS: its text and the nanoseconds it means. */
function render(day: number, t: { offsetNs: bigint; digits: number; offsetMinutes: number }): { text: string; ns: bigint } {
  const unit = 10n ** BigInt(9 - t.digits);
  const ns = BASE_NS + BigInt(day) * DAY_NS + (t.offsetNs / unit) * unit;
  const local = new Date(Number(ns / 1_000_000n) + t.offsetMinutes * 60_000);
  const fraction =
    t.digits === 0
      ? ''
      : `.${String(ns % 1_000_000_000n)
          .padStart(9, '0')
          .slice(0, t.digits)}`;
  const abs = Math.abs(t.offsetMinutes);
  const zone =
    t.offsetMinutes === 0
      ? 'Z'
      : `${t.offsetMinutes < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
  return { text: `${local.toISOString().slice(0, 19)}${fraction}${zone}`, ns };
}

const reading = fc.record({ time: timestamp, ship: id, cargo: id, value: fc.double({ noNaN: true, noDefaultInfinity: true }) });

/** JSON with -0 kept, as a device's serializer writes it. */
const toJson = (batch: unknown[]): string =>
  JSON.stringify(batch, (key, value: unknown) => (key === 'value' && Object.is(value, -0) ? '@-0@' : value)).replaceAll('"@-0@"', '-0');

describe('any valid reading round-trips exactly through the queue and ILP into QuestDB', () => {
  it('keeps ids, doubles and timestamps bit for bit', async () => {
    // Every execution, shrinking included, writes into a day of its own and reads that day back.
    let day = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(reading, { minLength: 1, maxLength: 40 }), async (generated) => {
        day += 1;
        const rendered = generated.map((r) => ({ ...r, time: render(day, r.time) }));
        const unique = new Map(rendered.map((r) => [`${r.time.ns}|${r.ship}|${r.cargo}`, r]));
        const body = toJson([...unique.values()].map((r) => ({ time: r.time.text, ship_id: r.ship, cargo_id: r.cargo, value: r.value })));
        expect((await gw.post('/api/v2/ingest/batch', body)).status).toBe(200);
        await waitForDrained(gw);
        await waitForWalApplied(gw.table);
        const from = BASE_NS + BigInt(day) * DAY_NS;
        const rows = (
          await sql<[string, string, string, number]>(
            `SELECT cast(cast(time AS long) AS string), ship_id, cargo_id, value FROM "${gw.table}" WHERE cast(time AS long) >= ${from} AND cast(time AS long) < ${from + DAY_NS}`,
          )
        ).dataset;
        const stored = new Map(rows.map(([time, ship, cargo, value]) => [`${time}|${ship}|${cargo}`, value]));
        expect(stored.size).toBe(unique.size);
        for (const [key, r] of unique) {
          expect(stored.has(key)).toBe(true);
          expect(Object.is(stored.get(key), r.value)).toBe(true);
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});
