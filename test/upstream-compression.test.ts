import { afterAll, describe, expect, it } from 'vitest';
import { CountingProxy } from '../scripts/lib/counting-proxy.mjs';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { previousReleaseBundle } from '../scripts/lib/previous-release.mjs';
import { releases } from '../scripts/lib/releases.mjs';
import { createLogger } from '../src/log/logger.js';
import type { QueueRecord } from '../src/queue/queue-reader.js';
import { outgoingReadings } from '../src/sinks/outgoing-readings.js';
import { batchBody } from '../src/sinks/upstream/batch-json.js';
import { ASKING_READINGS, UpstreamTarget } from '../src/sinks/upstream/upstream-target.js';
import type { UpstreamCompression } from '../src/sinks/upstream/upstream-link.js';
import { startTestGateway, TEST_KEY, type TestGateway } from './support/gateway.js';
import { tempDir } from './support/temp-dir.js';
import { sql, uniqueTable, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { inject } from 'vitest';

/** The last release whose ingest answers a compressed body 415: a centre rolled back to it. */
const PLAIN_RELEASE = releases().find((release) => release.version === '0.4.0')!;

// The upstream sink's link to a real central gateway: plain JSON until the centre says what else it
// takes, then compressed batches in the series form; a centre that refuses them (415) gets plain JSON.

const started: { stop(): Promise<void> }[] = [];
afterAll(async () => {
  for (const s of started.reverse()) await s.stop();
});

async function central(env: Record<string, string> = {}): Promise<TestGateway> {
  const gw = await startTestGateway(env);
  started.push(gw);
  return gw;
}

async function proxyTo(url: string): Promise<CountingProxy> {
  const proxy = await CountingProxy.start(Number(new URL(url).port));
  started.push({ stop: () => proxy.close() });
  return proxy;
}

/** The sink's log lines, as objects. */
function logLines(): { lines: Record<string, unknown>[]; logger: ReturnType<typeof createLogger> } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line)) });
  return { lines, logger };
}

function target(url: string, compression: UpstreamCompression, logger = createLogger('silent')): UpstreamTarget {
  const t = new UpstreamTarget(
    {
      url,
      apiKey: TEST_KEY,
      caFile: undefined,
      proxy: undefined,
      timeoutMs: 10_000,
      maxReadings: 1000,
      maxBodyBytes: 1 << 20,
      site: 'site-a',
      compression,
    },
    logger,
  );
  started.push({ stop: () => t.close() });
  return t;
}

const BASE_MS = Date.UTC(2026, 4, 27, 10, 0, 0);
const SHIPS = ['mv-aurora', 'mv-baltic-trader', 'mv-coral-bay'];
const CARGOS = ['main_engine_rpm', 'exhaust_temp_c', 'hold1_temp_c', 'latitude', 'longitude', 'speed_kn'];

/** A site's readings as queued: every 5 s per ship and cargo id, times to the millisecond, values as sensors give them. */
function records(round: number, count: number): QueueRecord[] {
  return Array.from({ length: count }, (_, id) => {
    const lines: string[] = [];
    for (const ship of SHIPS) {
      for (const [c, cargo] of CARGOS.entries()) {
        const step = round * count + id;
        const ms = BASE_MS + step * 5000 + c * 13;
        const value =
          cargo === 'latitude' ? 53.546112 + step * 0.000031 : cargo === 'main_engine_rpm' ? 92 + (step % 3) : 12.3 + (step % 10) / 10;
        lines.push(`${BigInt(ms) * 1_000_000n}\t${ship}\t${cargo}\t${Number(value.toFixed(6))}`);
      }
    }
    const payload = lines.join('\n');
    return { segment: 1, id: round * count + id + 1, receivedMs: Date.now(), readings: lines.length, bytes: payload.length, payload };
  });
}

const readingsOf = (batch: QueueRecord[]) => batch.reduce((n, r) => n + r.readings, 0);

/** Every reading of `batches` as the centre should hold it: time, ship, cargo, value. */
function expectedRows(batches: QueueRecord[][]): [string, string, string, number][] {
  return batches
    .flat()
    .flatMap((r) => r.payload.split('\n'))
    .map((line) => {
      const [ns, ship, cargo, value] = line.split('\t') as [string, string, string, string];
      return [new Date(Number(BigInt(ns) / 1_000_000n)).toISOString().replace('Z', '000000Z'), ship, cargo, Number(value)] as [
        string,
        string,
        string,
        number,
      ];
    })
    .sort((a, b) => (a.join() < b.join() ? -1 : 1));
}

async function storedRows(url: string, table: string, count: number): Promise<[string, string, string, number][]> {
  expect(await waitForCount(`SELECT count() FROM '${table}'`, count)).toBe(count);
  await waitForWalApplied(table);
  const rows = (await sql<[string, string, string, number]>(`SELECT time, ship_id, cargo_id, value FROM '${table}'`, url)).dataset;
  return rows.sort((a, b) => (a.join() < b.join() ? -1 : 1));
}

describe('the upstream link to a central gateway', () => {
  it('goes compressed in the series form once the centre offers them, a tenth of the plain bytes or less; the centre stores every reading exactly', async () => {
    const centre = await central();
    const proxy = await proxyTo(centre.url);
    const { lines, logger } = logLines();
    const t = target(`${proxy.url}/api/v2/ingest/batch`, 'gzip', logger);
    const batches = [0, 1, 2].map((round) => records(round, 50));
    const perDelivery: number[] = [];
    for (const [round, batch] of batches.entries()) {
      proxy.reset();
      // The run's first request holds ASKING_READINGS readings, as plain JSON before the centre has
      // said anything; the rest of that batch goes compressed in a second.
      expect(await t.deliver(batch)).toEqual({ ok: true, requests: round === 0 ? 2 : 1, deadLetters: [] });
      perDelivery.push(proxy.total());
    }
    const plain = Buffer.byteLength(batchBody(outgoingReadings(batches[0]!, [])));
    for (const bytes of perDelivery) expect(bytes * 10).toBeLessThan(plain);
    // The first delivery pays its small plain request and one more request's headers, no more.
    expect(perDelivery[0]!).toBeLessThan(perDelivery[1]! + (plain * ASKING_READINGS) / readingsOf(batches[0]!) + 1024);
    expect(lines.filter((l) => l['event'] === 'upstream_compression')).toMatchObject([{ coding: 'gzip', seriesForm: true }]);
    await waitForDrained(centre);
    expect(await storedRows(inject('questdbUrl'), centre.table, 3 * readingsOf(batches[0]!))).toEqual(expectedRows(batches));
  });

  it('dead-letters exactly the readings the centre refuses in a series-form batch, whose indices count series by series', async () => {
    const centre = await central({ MAX_ID_LENGTH: '12' });
    const { lines, logger } = logLines();
    const t = target(`${centre.url}/api/v2/ingest/batch`, 'gzip', logger);
    // mv-baltic-trader (16 characters), main_engine_rpm (15) and exhaust_temp_c (14) are too long for the
    // centre: it refuses their readings, scattered through every record and every series.
    const tooLong = (line: string) =>
      line
        .split('\t')
        .slice(1, 3)
        .some((id) => id.length > 12);
    const refusedOf = (batch: QueueRecord[]) =>
      batch
        .flatMap((r) => r.payload.split('\n'))
        .filter(tooLong)
        .sort();
    // The run's first request goes as plain JSON, the rest in the series form.
    const batches = [records(0, 5), records(1, 5)];
    for (const batch of batches) {
      const delivery = await t.deliver(batch);
      if (!delivery.ok) throw new Error(delivery.message);
      expect(delivery.deadLetters.map((d) => d.line).sort()).toEqual(refusedOf(batch));
      expect(delivery.deadLetters.map((d) => d.reason)).toContainEqual(expect.stringMatching(/^upstream answered 422: ship_id/));
      expect(delivery.deadLetters.map((d) => d.reason)).toContainEqual(expect.stringMatching(/^upstream answered 422: cargo_id/));
    }
    expect(lines.filter((l) => l['event'] === 'upstream_compression')).toMatchObject([{ coding: 'gzip', seriesForm: true }]);
    const kept = batches.reduce((n, batch) => n + readingsOf(batch) - refusedOf(batch).length, 0);
    await waitForDrained(centre);
    expect(await storedRows(inject('questdbUrl'), centre.table, kept)).toEqual(
      expectedRows(batches).filter(([, ship, cargo]) => ship.length <= 12 && cargo.length <= 12),
    );
  });

  it('stays plain JSON with UPSTREAM_COMPRESSION off', async () => {
    const centre = await central();
    const proxy = await proxyTo(centre.url);
    const t = target(`${proxy.url}/api/v2/ingest/batch`, 'off');
    const perRequest: number[] = [];
    for (const round of [0, 1]) {
      proxy.reset();
      expect(await t.deliver(records(round, 50))).toMatchObject({ ok: true, deadLetters: [] });
      perRequest.push(proxy.total());
    }
    // The same readings but for their values and times: within a few percent.
    expect(Math.abs(perRequest[1]! - perRequest[0]!)).toBeLessThan(perRequest[0]! / 20);
  });

  it(`falls back to plain JSON when the centre answers 415 (rolled back to v${PLAIN_RELEASE.version}), logged once, nothing lost or dead-lettered`, async () => {
    const release = previousReleaseBundle(PLAIN_RELEASE);
    if ('unavailable' in release) throw new Error(`v${PLAIN_RELEASE.version} cannot be built: ${release.unavailable}`);
    const centre = await central();
    const proxy = await proxyTo(centre.url);
    const { lines, logger } = logLines();
    const t = target(`${proxy.url}/api/v2/ingest/batch`, 'gzip', logger);
    const before = records(0, 20);
    expect(await t.deliver(before)).toMatchObject({ ok: true, deadLetters: [] });

    const table = uniqueTable('rolled_back');
    const old = await startGatewayProcess({
      bundle: release.bundle,
      env: {
        API_KEY: TEST_KEY,
        DATA_DIR: tempDir('rolled-back'),
        QUESTDB_URL: inject('questdbUrl'),
        QUESTDB_TABLE: table,
        RETENTION_DAYS: '0',
        MAX_TIME_AHEAD_S: '9999999999',
        HEALTH_REPORT: 'false',
        FLUSH_INTERVAL_MS: '50',
      },
    });
    started.push({
      stop: async () => {
        old.child.kill('SIGTERM');
        await old.exited;
      },
    });
    proxy.retarget(Number(new URL(old.url).port));
    const after = [1, 2].map((round) => records(round, 20));
    expect(await t.deliver(after[0]!)).toEqual({ ok: true, requests: 1, deadLetters: [] });
    expect(await t.deliver(after[1]!)).toEqual({ ok: true, requests: 1, deadLetters: [] });
    expect(lines.filter((l) => l['event'] === 'upstream_compression_refused')).toMatchObject([
      { level: 40, answer: expect.stringContaining('Content-Encoding') },
    ]);
    expect(await storedRows(inject('questdbUrl'), table, 2 * readingsOf(after[0]!))).toEqual(expectedRows(after));
  }, 600_000);
});
