import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonAnswer, startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ MAX_BATCH_READINGS: '5' });
});
afterAll(() => gw.stop());

/** The stored rows of one ship, by cargo id, once flushed and applied. */
async function rowsOf(ship: string): Promise<[string, number, string][]> {
  await waitForDrained(gw);
  await waitForWalApplied(gw.table);
  return (
    await sql<[string, number, string]>(`SELECT cargo_id, value, time FROM "${gw.table}" WHERE ship_id = '${ship}' ORDER BY time, cargo_id`)
  ).dataset;
}

describe('GPS fixes as the monitoring agent posts them', () => {
  it('stores latitude, longitude and every other finite number of a fix with the fix time, to the nanosecond', async () => {
    const fix = {
      ship_id: 'gps-1',
      time: '2026-02-04T10:00:00.123456789Z',
      latitude: 53.5461,
      longitude: 9.9661,
      altitude: 12.5,
      satellites: 9,
      source: 'gpsd',
      fix: { mode: 3 },
    };
    expect(await jsonAnswer(await gw.post('/api/v2/ingest/gps', fix))).toEqual({
      status: 200,
      body: { status: 'GPS data received and queued', count: 4 },
    });
    expect(await rowsOf('gps-1')).toEqual([
      ['altitude', 12.5, '2026-02-04T10:00:00.123456789Z'],
      ['latitude', 53.5461, '2026-02-04T10:00:00.123456789Z'],
      ['longitude', 9.9661, '2026-02-04T10:00:00.123456789Z'],
      ['satellites', 9, '2026-02-04T10:00:00.123456789Z'],
    ]);
  });

  it('gives the readings of a fix without a time one shared receive time, distinct per fix', async () => {
    const fixes = [
      { ship_id: 'gps-2', latitude: 1, longitude: 2 },
      { ship_id: 'gps-2', latitude: 3, longitude: 4, speed: 5 },
    ];
    expect(await jsonAnswer(await gw.post('/api/v2/ingest/gps/', fixes))).toEqual({
      status: 200,
      body: { status: 'GPS data received and queued', count: 5 },
    });
    const rows = await rowsOf('gps-2');
    expect(rows.map(([cargo, value]) => [cargo, value])).toEqual([
      ['latitude', 1],
      ['longitude', 2],
      ['latitude', 3],
      ['longitude', 4],
      ['speed', 5],
    ]);
    const times = rows.map(([, , time]) => time);
    expect(new Set(times.slice(0, 2)).size).toBe(1);
    expect(new Set(times.slice(2)).size).toBe(1);
    expect(times[0]).not.toBe(times[2]);
  });

  it.each([
    '/api/v2/ingest/harbor-1/gps',
    '/api/v2/ingest/ingest/harbor-1/gps',
    '/api/v1/ingest/ingest/harbor-1/gps',
    '/api/v2/ingest/harbor-1/gps/',
  ])('serves the hosted form %s', async (path) => {
    const answer = await jsonAnswer(await gw.post(path, { ship_id: 'gps-3', time: '2026-02-04T10:00:00Z', latitude: -90, longitude: 180 }));
    expect(answer).toEqual({ status: 200, body: { status: 'GPS data received and queued', count: 2 } });
  });

  it('refuses positions out of range with 422 naming the fix and the field, storing nothing of the request', async () => {
    const fixes = [
      { ship_id: 'gps-4', latitude: 10, longitude: 10 },
      { ship_id: 'gps-4', latitude: 90.5, longitude: -180.01 },
    ];
    const answer = await jsonAnswer(await gw.post('/api/v2/ingest/gps', fixes));
    expect(answer.status).toBe(422);
    expect(answer.body['details']).toEqual([
      { loc: ['body', 1, 'latitude'], msg: 'Latitude must be between -90 and 90', type: 'value_error' },
      { loc: ['body', 1, 'longitude'], msg: 'Longitude must be between -180 and 180', type: 'value_error' },
    ]);
    const single = await jsonAnswer(await gw.post('/api/v2/ingest/gps', { ship_id: 'gps-4', latitude: 'north', time: 'yesterday' }));
    expect(single.status).toBe(422);
    expect(single.body['details']).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ loc: ['body', 'latitude'], type: 'number_type' }),
        expect.objectContaining({ loc: ['body', 'longitude'], type: 'missing' }),
      ]),
    );
    expect(await rowsOf('gps-4')).toEqual([]);
  });

  it('names a bad ship id, time or field name where it is', async () => {
    const answer = await jsonAnswer(
      await gw.post('/api/v2/ingest/gps', [{ latitude: 1, longitude: 2, time: '2026-13-01T00:00:00Z', ['x'.repeat(101)]: 3 }]),
    );
    expect(answer.status).toBe(422);
    expect(answer.body['details']).toEqual([
      expect.objectContaining({ loc: ['body', 0, 'time'], type: 'datetime_value' }),
      expect.objectContaining({ loc: ['body', 0, 'ship_id'], type: 'missing' }),
      expect.objectContaining({ loc: ['body', 0, 'x'.repeat(101)], type: 'string_too_long' }),
    ]);
  });

  it('refuses bodies that are not fixes', async () => {
    expect((await jsonAnswer(await gw.post('/api/v2/ingest/gps', []))).status).toBe(400);
    expect(
      (await jsonAnswer(await gw.post('/api/v2/ingest/gps', new Array(6).fill({ ship_id: 's', latitude: 0, longitude: 0 })))).status,
    ).toBe(400);
    const notObjects = await jsonAnswer(await gw.post('/api/v2/ingest/gps', [1, null]));
    expect(notObjects).toMatchObject({
      status: 422,
      body: {
        details: [
          { loc: ['body', 0], type: 'object_type' },
          { loc: ['body', 1], type: 'object_type' },
        ],
      },
    });
    expect((await jsonAnswer(await gw.post('/api/v2/ingest/gps', '"north"'))).status).toBe(422);
  });
});
