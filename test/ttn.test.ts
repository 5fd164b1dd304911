import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonAnswer, startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw.stop());

async function rowsOf(device: string): Promise<[string, number, string][]> {
  await waitForDrained(gw);
  await waitForWalApplied(gw.table);
  return (
    await sql<[string, number, string]>(`SELECT cargo_id, value, time FROM "${gw.table}" WHERE ship_id = '${device}' ORDER BY cargo_id`)
  ).dataset;
}

const uplink = (device: string, payload: Record<string, unknown>) => ({
  end_device_ids: { device_id: device, application_ids: { application_id: 'harbor' }, dev_eui: '70B3D57ED0000001' },
  received_at: '2026-02-04T10:00:01.500000000Z',
  uplink_message: {
    f_port: 1,
    received_at: '2026-02-04T10:00:01.400000000Z',
    decoded_payload: payload,
    rx_metadata: [{ gateway_ids: { gateway_id: 'gw-1' }, rssi: -42, channel_rssi: -43, snr: 9.5 }, { rssi: -99 }],
    settings: { data_rate: { lora: { bandwidth: 125000, spreading_factor: 7 } }, frequency: '868100000' },
  },
});

describe('The Things Network webhook as the existing stack answers it', () => {
  it('stores numbers and numeric strings of the payload and the radio metadata, at the message received_at', async () => {
    const answer = await jsonAnswer(
      await gw.post(
        '/api/v2/ingest/ttn',
        uplink('lora-1', { temperature: 21.5, battery: '3.3', label: 'dock', on: true, nested: { a: 1 } }),
      ),
    );
    expect(answer).toEqual({ status: 200, body: { status: 'Uplink received and queued', count: 8 } });
    const at = '2026-02-04T10:00:01.500000000Z';
    expect(await rowsOf('lora-1')).toEqual([
      ['bandwidth', 125000, at],
      ['battery', 3.3, at],
      ['channel_rssi', -43, at],
      ['frequency', 868100000, at],
      ['rssi', -42, at],
      ['snr', 9.5, at],
      ['spreading_factor', 7, at],
      ['temperature', 21.5, at],
    ]);
  });

  it('uses decoded_payload.time as the reading time when present', async () => {
    const answer = await jsonAnswer(
      await gw.post('/api/v2/ingest/ttn', uplink('lora-2', { time: '2026-02-04T09:59:00.000000001Z', level: 4 })),
    );
    expect(answer).toMatchObject({ status: 200, body: { count: 7 } });
    const rows = await rowsOf('lora-2');
    expect(rows.find(([cargo]) => cargo === 'level')).toEqual(['level', 4, '2026-02-04T09:59:00.000000001Z']);
    expect(new Set(rows.map(([, , time]) => time))).toEqual(new Set(['2026-02-04T09:59:00.000000001Z']));
  });

  it('ignores a decoded_payload.time more than 24 h ahead and stores the readings at received_at, as the existing stack does', async () => {
    const answer = await jsonAnswer(await gw.post('/api/v2/ingest/ttn', uplink('lora-4', { time: '2031-01-01T00:00:00.000Z', level: 5 })));
    expect(answer).toMatchObject({ status: 200, body: { count: 7 } });
    const rows = await rowsOf('lora-4');
    expect(new Set(rows.map(([, , time]) => time))).toEqual(new Set(['2026-02-04T10:00:01.500000000Z']));
  });

  it('answers 200 to an uplink without numbers and to other message types, storing nothing', async () => {
    const noNumbers = {
      end_device_ids: { device_id: 'lora-3' },
      received_at: '2026-02-04T10:00:00Z',
      uplink_message: { decoded_payload: { label: 'x' } },
    };
    const joinAccept = {
      end_device_ids: { device_id: 'lora-3' },
      received_at: '2026-02-04T10:00:00Z',
      join_accept: { session_key_id: 'AYa', received_at: '2026-02-04T10:00:00Z' },
    };
    const downlinkAck = { end_device_ids: { device_id: 'lora-3' }, downlink_ack: { f_port: 1, frm_payload: 'AQ==' } };
    const badMetadata = {
      end_device_ids: { device_id: 'lora-3' },
      uplink_message: { decoded_payload: 'x', rx_metadata: 'none', settings: 5 },
    };
    for (const message of [noNumbers, joinAccept, downlinkAck, badMetadata]) {
      expect(await jsonAnswer(await gw.post('/api/v2/ingest/ttn', message))).toEqual({
        status: 200,
        body: { status: 'No numeric data extracted', count: 0 },
      });
    }
    expect(await rowsOf('lora-3')).toEqual([]);
  });

  it.each([
    '/api/v2/ingest/harbor-1/ttn',
    '/api/v2/ingest/ingest/harbor-1/ttn',
    '/api/v1/ingest/ingest/harbor-1/ttn',
    '/api/v2/ingest/ttn/',
  ])('serves %s', async (path) => {
    expect((await jsonAnswer(await gw.post(path, uplink('lora-4', { level: 1 })))).status).toBe(200);
  });

  it('answers 422 only to bodies that are not TTN messages', async () => {
    for (const body of [{ hello: 1 }, [uplink('lora-5', { a: 1 })], { end_device_ids: { dev_eui: 'x' } }, '"uplink"']) {
      const answer = await jsonAnswer(await gw.post('/api/v2/ingest/ttn', body));
      expect(answer.status).toBe(422);
      expect(answer.body['message']).toBe('Body is not a The Things Network webhook message');
    }
  });
});
