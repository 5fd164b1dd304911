import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../log/logger.js';
import type { QueueRecord } from '../../queue/queue-reader.js';
import { SERIES_MEDIA_TYPE } from '../../reading/series-form.js';
import { outgoingReadings } from '../outgoing-readings.js';
import { listNames, UpstreamLink } from './upstream-link.js';

const record: QueueRecord = {
  segment: 1,
  id: 1,
  receivedMs: 0,
  readings: 4,
  bytes: 0,
  payload: [
    '1779876000000000000\tMV-1\ttemp\t12.3',
    '1779876000000000000\tMV-2\ttemp\t11.9',
    '1779876005000000000\tMV-1\ttemp\t12.4',
    '1779876005000000000\tMV-2\ttemp\t-0',
  ].join('\n'),
};
const chunk = outgoingReadings([record], []);
const OFFERS = { acceptEncoding: 'gzip, deflate, br', acceptPost: `application/json, ${SERIES_MEDIA_TYPE}` };

function logged() {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: createLogger('info', { write: (line: string) => lines.push(JSON.parse(line)) }) };
}

describe('listNames', () => {
  it('finds a token in a list header, whatever its case, unless its weight is 0', () => {
    expect(listNames('gzip, deflate', 'gzip')).toBe(true);
    expect(listNames('Deflate;q=0.5 , GZIP', 'gzip')).toBe(true);
    expect(listNames('gzip;q=0', 'gzip')).toBe(false);
    expect(listNames('x-gzip', 'gzip')).toBe(false);
    expect(listNames(undefined, 'gzip')).toBe(false);
  });
});

describe('UpstreamLink', () => {
  it('sends plain JSON in queue order until the upstream offers more', async () => {
    const link = new UpstreamLink('gzip', createLogger('silent'));
    const plain = await link.encode(chunk);
    expect(plain).toEqual({
      body: `[${chunk.map((r) => r.json).join(',')}]`,
      headers: { 'content-type': 'application/json' },
      order: undefined,
      learnt: false,
    });
    link.learn({ acceptEncoding: undefined, acceptPost: undefined });
    expect(await link.encode(chunk)).toEqual(plain);
  });

  it('once offered, sends the series form compressed, saying where each reading of the chunk stands; told once', async () => {
    const { lines, logger } = logged();
    const link = new UpstreamLink('gzip', logger);
    link.learn(OFFERS);
    link.learn(OFFERS);
    const batch = await link.encode(chunk);
    expect(batch.headers).toEqual({ 'content-type': SERIES_MEDIA_TYPE, 'content-encoding': 'gzip' });
    expect(batch.order).toEqual([0, 2, 1, 3]);
    expect(JSON.parse(gunzipSync(batch.body as Buffer).toString())).toEqual({
      time0: '2026-05-27T10:00:00.000000000Z',
      time_unit: 's',
      series: [
        { ship_id: 'MV-1', cargo_id: 'temp', times: [0, 5], values: [12.3, 12.4] },
        { ship_id: 'MV-2', cargo_id: 'temp', times: [0, 5], values: [11.9, -0] },
      ],
    });
    expect(lines.map((l) => [l['event'], l['coding'], l['seriesForm']])).toEqual([['upstream_compression', 'gzip', true]]);
  });

  it('compresses with the configured coding, with gzip where the upstream takes only that, and never with off', async () => {
    const deflate = new UpstreamLink('deflate', createLogger('silent'));
    deflate.learn(OFFERS);
    const batch = await deflate.encode(chunk);
    expect(batch.headers['content-encoding']).toBe('deflate');
    expect(JSON.parse(inflateSync(batch.body as Buffer).toString()).time_unit).toBe('s');

    const br = new UpstreamLink('br', createLogger('silent'));
    br.learn(OFFERS);
    const brBatch = await br.encode(chunk);
    expect(brBatch.headers['content-encoding']).toBe('br');
    expect(JSON.parse(brotliDecompressSync(brBatch.body as Buffer).toString()).time_unit).toBe('s');

    const { lines, logger } = logged();
    const gzipOnly = new UpstreamLink('br', logger);
    gzipOnly.learn({ acceptEncoding: 'gzip, deflate', acceptPost: undefined });
    expect((await gzipOnly.encode(chunk)).headers).toEqual({ 'content-type': 'application/json', 'content-encoding': 'gzip' });
    gzipOnly.learn(OFFERS);
    expect((await gzipOnly.encode(chunk)).headers['content-encoding']).toBe('br');
    expect(lines.map((l) => l['coding'])).toEqual(['gzip', 'br']);

    const neither = new UpstreamLink('deflate', createLogger('silent'));
    neither.learn({ acceptEncoding: 'identity', acceptPost: undefined });
    expect((await neither.encode(chunk)).headers).toEqual({ 'content-type': 'application/json' });

    const off = new UpstreamLink('off', createLogger('silent'));
    off.learn(OFFERS);
    expect(await off.encode(chunk)).toMatchObject({ headers: { 'content-type': 'application/json' }, learnt: false });
  });

  it('after a 415 to a learnt form, sends plain JSON for good and says so once', async () => {
    const { lines, logger } = logged();
    const link = new UpstreamLink('gzip', logger);
    link.learn(OFFERS);
    const learnt = await link.encode(chunk);
    expect(link.refused(learnt, 'unsupported')).toBe(true);
    const plain = await link.encode(chunk);
    expect(plain).toMatchObject({ headers: { 'content-type': 'application/json' }, order: undefined, learnt: false });
    // A 415 to plain JSON is the upstream refusing the readings, for the answer's usual reading.
    expect(link.refused(plain, 'unsupported')).toBe(false);
    link.learn(OFFERS);
    expect((await link.encode(chunk)).learnt).toBe(false);
    expect(lines.filter((l) => l['event'] === 'upstream_compression_refused')).toHaveLength(1);
  });
});
