import { afterAll, describe, expect, inject, it } from 'vitest';
import type { SinkSnapshot } from '../src/health/snapshot.js';
import { startQuestDb, type QuestDbServer } from '../scripts/lib/questdb.mjs';
import { TEST_KEY, startTestGateway } from './support/gateway.js';
import { sql, uniqueTable, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

let questdb: QuestDbServer | undefined;
afterAll(async () => {
  await questdb?.stop();
});

const HOUR = 3_600_000;
const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();
const reading = (time: string, value: number) => ({ time, ship_id: 'buoy', cargo_id: 'depth', value });

describe('the reading times the gateway accepts', () => {
  it('never include one the TTL drops, nor one that makes the TTL drop others, even when QuestDB counts the TTL from the newest row', async () => {
    // The worst case: QuestDB's TTL counts from the table's newest time alone, not capped by its clock.
    questdb = await startQuestDb({ dataDir: tempDir('window-qdb'), env: { QDB_CAIRO_TTL_USE_WALL_CLOCK: 'false' } });
    const table = 'window';
    const gw = await startTestGateway({
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: table,
      RETENTION_DAYS: '1',
      MAX_TIME_AHEAD_S: '3600',
    });
    const url = questdb.httpUrl;
    const values = async () => (await sql<[number]>(`SELECT value FROM ${table} ORDER BY value`, url)).dataset.map(([v]) => v);
    try {
      // Accepted: back to a day less the hour ahead, and up to an hour ahead.
      const accepted = [reading(at(-22.9 * HOUR), 1), reading(at(-60_000), 2), reading(at(0), 3), reading(at(0.98 * HOUR), 4)];
      expect((await gw.post('/api/v2/ingest/batch', accepted)).status).toBe(200);

      const refused = [
        reading(at(-23.1 * HOUR), 10),
        reading('1970-01-01T00:00:05.000Z', 11),
        reading(at(1.02 * HOUR), 12),
        reading('2100-01-01T00:00:00.000Z', 13),
        reading('0099-06-01T12:00:00.000Z', 14),
      ];
      for (const [i, r] of refused.entries()) {
        const response = await gw.post('/api/v2/ingest/batch', [reading(at(0), 100 + i), r]);
        expect(response.status).toBe(422);
        const body = (await response.json()) as { details: { loc: unknown[]; msg: string; type: string }[] };
        expect(body.details).toHaveLength(1);
        expect(body.details[0]!.loc).toEqual(['body', 1, 'time']);
        expect(body.details[0]!.type).toBe(['datetime_past', 'datetime_past', 'datetime_future', 'datetime_future', 'datetime_range'][i]);
      }
      const past = await gw.post('/api/v2/ingest/', reading('1970-01-01T00:00:05.000Z', 15));
      expect(((await past.json()) as { details: { loc: unknown[]; msg: string }[] }).details[0]).toMatchObject({
        loc: ['body', 'time'],
        msg: expect.stringMatching(
          /before the retention window, which starts at .*\(RETENTION_DAYS=1, less MAX_TIME_AHEAD_S\).*Is the device clock set\?/,
        ),
      });

      // A later write makes QuestDB apply its TTL again, with the hour-ahead reading as the newest.
      await waitForDrained(gw);
      expect((await gw.post('/api/v2/ingest/', reading(at(0), 5))).status).toBe(200);
      await waitForDrained(gw);
      await waitForWalApplied(table, 20_000, url);
      expect(await values()).toEqual([1, 2, 3, 4, 5]);
      // The TTL is at work: a row written past the gateway, older than it keeps, is dropped at once.
      await sql(`INSERT INTO ${table} (time, ship_id, cargo_id, value) VALUES (dateadd('d', -3, now()), 'intruder', 'depth', 99)`, url);
      await waitForWalApplied(table, 20_000, url);
      expect(await values()).toEqual([1, 2, 3, 4, 5]);
    } finally {
      await gw.stop();
    }
  });

  it('older than the local table keeps, for a remote sink that keeps longer: the local sink counts them expired, never delivered', async () => {
    const local = uniqueTable('local');
    const central = uniqueTable('central');
    const gw = await startTestGateway({
      QUESTDB_TABLE: local,
      RETENTION_DAYS: '7',
      MAX_TIME_AHEAD_S: '3600',
      MAX_TIME_AGE_DAYS: '3650',
      REMOTE_QUESTDB_URL: inject('questdbUrl'),
      REMOTE_QUESTDB_TABLE: central,
      // Gateways of other tests write to the same QuestDB: a site of its own, or its claim there is another's.
      SITE_ID: central,
    });
    try {
      const day = 24 * HOUR;
      const readings = [reading(at(-400 * day), 1), reading(at(-8 * day), 2), reading(at(-6 * day), 3), reading(at(0), 4)];
      expect((await gw.post('/api/v2/ingest/batch', readings)).status).toBe(200);
      expect((await gw.post('/api/v2/ingest/', reading(at(-3651 * day), 5))).status).toBe(422);
      await waitForDrained(gw);
      const sinks = ((await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { sinks: SinkSnapshot[] })
        .sinks;
      expect(sinks.find((s) => s.name === 'questdb')).toMatchObject({ delivered: 2, expired: 2, backlog: 0 });
      expect(sinks.find((s) => s.name === 'remote-questdb')).toMatchObject({ delivered: 4, expired: 0, backlog: 0 });
      const values = async (table: string) => {
        await waitForWalApplied(table);
        return (await sql<[number]>(`SELECT value FROM ${table} ORDER BY value`)).dataset.map(([v]) => v);
      };
      expect(await values(local)).toEqual([3, 4]);
      expect(await values(central)).toEqual([1, 2, 3, 4]);
    } finally {
      await gw.stop();
    }
  });
});
