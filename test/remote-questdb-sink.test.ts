// The remote QuestDB sink in a running gateway: ILP over HTTPS with a bearer token, beside the local
// QuestDB sink or instead of it. Open-source QuestDB has neither TLS nor tokens, so the "remote"
// QuestDB is the suite's real one behind a TLS-terminating proxy that demands the token, as QuestDB
// Enterprise would; the remote sink writes to a table of its own there.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { GatewaySnapshot, SinkSnapshot } from '../src/health/snapshot.js';
import { freePort } from '../scripts/lib/ports.mjs';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, storedCounts, uniqueTable, waitForCount, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { TlsTokenProxy } from './support/tls-proxy.js';
import { waitUntil } from './support/wait.js';

const TOKEN = 'remote-token-0123456789abcdef';

/** `count` readings with times unique to this batch. */
function batch(count: number, batchIndex: number): unknown[] {
  return Array.from({ length: count }, (_, i) => ({
    time: new Date(Date.UTC(2026, 10, 21, 10, batchIndex, 0, i)).toISOString(),
    ship_id: `ship-${i % 7}`,
    cargo_id: `cargo-${i % 3}`,
    value: batchIndex * 1000 + i,
  }));
}

describe('a remote QuestDB sink', () => {
  let proxy: TlsTokenProxy;
  const gateways: TestGateway[] = [];
  const dir = tempDir('remote-qdb');
  const file = (name: string, content: string): string => {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  };
  const start = async (env: Record<string, string>): Promise<TestGateway> => {
    const gw = await startTestGateway(env);
    gateways.push(gw);
    return gw;
  };
  const status = async (gw: TestGateway): Promise<GatewaySnapshot> =>
    (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json() as Promise<GatewaySnapshot>;
  const sink = async (gw: TestGateway, name: string): Promise<SinkSnapshot> => {
    const found = (await status(gw)).sinks.find((s) => s.name === name);
    if (found === undefined) throw new Error(`no sink ${name} in /status`);
    return found;
  };
  const send = async (gw: TestGateway, batches: number, size: number): Promise<void> => {
    for (let b = 0; b < batches; b++) expect((await gw.post('/api/v2/ingest/batch', batch(size, b))).status).toBe(200);
  };

  beforeAll(async () => {
    proxy = await TlsTokenProxy.start(inject('questdbUrl'), TOKEN);
  });

  afterAll(async () => {
    for (const gw of gateways) await gw.stop();
    await proxy?.close();
  });

  it('delivers every reading exactly once to the local table and, over HTTPS with the token, to the remote one', async () => {
    const remoteTable = uniqueTable('remote');
    const gw = await start({
      REMOTE_QUESTDB_URL: proxy.url,
      REMOTE_QUESTDB_TOKEN_FILE: file('token', `${TOKEN}\n`),
      REMOTE_QUESTDB_CA_FILE: file('ca.pem', proxy.caPem),
      REMOTE_QUESTDB_TABLE: remoteTable,
      REMOTE_QUESTDB_BATCH_READINGS: '700',
    });
    await send(gw, 4, 500);
    for (const table of [gw.table, remoteTable]) {
      expect(await waitForCount(`SELECT count() FROM '${table}'`, 2000)).toBe(2000);
      await waitForWalApplied(table);
      expect(await storedCounts(table)).toEqual({ rows: 2000, distinct: 2000 });
    }
    // The remote table was made by the sink, deduplicating as the local one does.
    const dedup = await sql(`SELECT dedup FROM tables() WHERE table_name = '${remoteTable}'`);
    expect(dedup.dataset).toEqual([[true]]);
    await waitUntil('the remote sink has no backlog', async () => (await sink(gw, 'remote-questdb')).backlog === 0);
    const remote = await sink(gw, 'remote-questdb');
    expect(remote).toMatchObject({ delivered: 2000, deadLettered: 0, dropped: 0, policy: 'drop_oldest' });
    expect(remote.destination).toContain(proxy.url);
    expect(JSON.stringify(await status(gw))).not.toContain(TOKEN);
    expect(await sink(gw, 'questdb')).toMatchObject({ delivered: 2000, backlog: 0 });
  });

  it('keeps the readings queued for a refused token, as an error, while the local sink delivers', async () => {
    const remoteTable = uniqueTable('remote_refused');
    const gw = await start({
      REMOTE_QUESTDB_URL: proxy.url,
      REMOTE_QUESTDB_TOKEN_FILE: file('wrong-token', 'not-the-token-0123456789'),
      REMOTE_QUESTDB_CA_FILE: file('ca.pem', proxy.caPem),
      REMOTE_QUESTDB_TABLE: remoteTable,
    });
    await send(gw, 1, 300);
    expect(await waitForCount(`SELECT count() FROM '${gw.table}'`, 300)).toBe(300);
    await waitUntil('the remote sink failed twice', async () => (await sink(gw, 'remote-questdb')).consecutiveFailures >= 2);
    const remote = await sink(gw, 'remote-questdb');
    expect(remote).toMatchObject({ backlog: 300, delivered: 0, deadLettered: 0 });
    expect(remote.lastError?.message).toMatch(/refused the credentials \(401\)/);
    expect((await status(gw)).deadLetters).toBe(0);
    const tables = await sql(`SELECT count() FROM tables() WHERE table_name = '${remoteTable}'`);
    expect(tables.dataset).toEqual([[0]]);
  });

  it('forwards only with LOCAL_QUESTDB=off, and its health rows go to the remote QuestDB', async () => {
    const remoteTable = uniqueTable('remote_only');
    const gatewayName = uniqueTable('site');
    // Nobody listens at the local QuestDB's address: whatever arrives came through the proxy.
    const gw = await start({
      LOCAL_QUESTDB: 'off',
      QUESTDB_URL: `http://127.0.0.1:${await freePort()}`,
      REMOTE_QUESTDB_URL: proxy.url,
      REMOTE_QUESTDB_TOKEN_FILE: file('token', TOKEN),
      REMOTE_QUESTDB_CA_FILE: file('ca.pem', proxy.caPem),
      REMOTE_QUESTDB_TABLE: remoteTable,
      HEALTH_REPORT: 'true',
      HOUSEKEEPING_CRON: '* * * * * *',
      GATEWAY_NAME: gatewayName,
    });
    await send(gw, 2, 250);
    expect(await waitForCount(`SELECT count() FROM '${remoteTable}'`, 500)).toBe(500);
    expect((await status(gw)).sinks.map((s) => s.name)).toEqual(['remote-questdb']);
    const sinkRows = `SELECT count() FROM gateway_sink_health WHERE gateway = '${gatewayName}' AND sink = 'remote-questdb' AND backlog_readings = 0`;
    expect(await waitForCount(sinkRows, 1)).toBeGreaterThanOrEqual(1);
    const healthRows = await sql(`SELECT count() FROM gateway_health WHERE gateway = '${gatewayName}'`);
    expect(Number(healthRows.dataset[0]?.[0])).toBeGreaterThanOrEqual(1);
  });
});
