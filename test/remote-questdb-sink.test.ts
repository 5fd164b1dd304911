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
    // Each a site of its own: gateways of one site id are refused by the claims the remote QuestDB keeps.
    const gw = await startTestGateway({ SITE_ID: uniqueTable('site'), ...env });
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

  it('writes gzip-compressed ILP to a QuestDB that reads it, in a quarter of the bytes, and plain ILP to an older one', async () => {
    const bytesOf = async (compression: string, build: string | undefined): Promise<{ encodings: string[]; bytes: number }> => {
      const remoteTable = uniqueTable(`remote_${compression}`);
      proxy.build = build;
      proxy.writes.length = 0;
      const gw = await start({
        REMOTE_QUESTDB_URL: proxy.url,
        REMOTE_QUESTDB_TOKEN_FILE: file('token', `${TOKEN}\n`),
        REMOTE_QUESTDB_CA_FILE: file('ca.pem', proxy.caPem),
        REMOTE_QUESTDB_TABLE: remoteTable,
        REMOTE_QUESTDB_COMPRESSION: compression,
      });
      await send(gw, 4, 500);
      expect(await waitForCount(`SELECT count() FROM '${remoteTable}'`, 2000)).toBe(2000);
      await waitForWalApplied(remoteTable);
      expect(await storedCounts(remoteTable)).toMatchObject({ rows: 2000, distinct: 2000 });
      await waitUntil('the remote sink has no backlog', async () => (await sink(gw, 'remote-questdb')).backlog === 0);
      expect(await sink(gw, 'remote-questdb')).toMatchObject({ delivered: 2000, deadLettered: 0 });
      // Stopped here, so what it writes later counts for none of the others.
      gateways.splice(gateways.indexOf(gw), 1);
      await gw.stop();
      const writes = proxy.writes.splice(0);
      return { encodings: [...new Set(writes.map((w) => w.encoding))], bytes: writes.reduce((n, w) => n + w.bytes, 0) };
    };
    try {
      const gzip = await bytesOf('gzip', undefined);
      const plain = await bytesOf('off', undefined);
      const older = await bytesOf('gzip', 'Build Information: QuestDB 9.0.3, JDK 17.0.12, Commit Hash 0123abcd');
      expect(gzip.encodings).toEqual(['gzip']);
      expect(plain.encodings).toEqual(['identity']);
      expect(older.encodings).toEqual(['identity']);
      expect(gzip.bytes * 4).toBeLessThan(plain.bytes);
    } finally {
      proxy.build = undefined;
    }
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

  it('gives a site to the first gateway that writes under it: another of one site id holds its readings and overwrites nothing', async () => {
    const remoteTable = uniqueTable('remote_claims');
    const site = uniqueTable('pier');
    const remote = {
      REMOTE_QUESTDB_URL: proxy.url,
      REMOTE_QUESTDB_TOKEN_FILE: file('token', TOKEN),
      REMOTE_QUESTDB_CA_FILE: file('ca.pem', proxy.caPem),
      REMOTE_QUESTDB_TABLE: remoteTable,
    };
    const at = (second: number) => new Date(Date.UTC(2026, 10, 21, 9, 0, second)).toISOString();
    const reading = (second: number, value: number) => ({ time: at(second), ship_id: 'pump-1', cargo_id: 'pressure', value });
    const first = await start({ ...remote, SITE_ID: site });
    expect((await first.post('/api/v2/ingest/batch', [reading(0, 111)])).status).toBe(200);
    await waitUntil('the first delivered', async () => (await sink(first, 'remote-questdb')).backlog === 0);

    const cloneDir = tempDir('remote-clone');
    const clone = await start({ ...remote, SITE_ID: site, DATA_DIR: cloneDir });
    expect((await clone.post('/api/v2/ingest/batch', [reading(0, 333)])).status).toBe(200);
    await waitUntil('the clone holds', async () =>
      /gives site .* to another gateway/.test((await sink(clone, 'remote-questdb')).lastError?.message ?? ''),
    );
    const held = await sink(clone, 'remote-questdb');
    expect(held).toMatchObject({ backlog: 1, deadLettered: 0 });
    expect(held.lastError?.message).toContain(`instance ${(await status(first)).identity!.instance}`);
    // Its local QuestDB has it; the remote keeps the first's.
    expect(await waitForCount(`SELECT count() FROM '${clone.table}'`, 1)).toBe(1);
    await waitForWalApplied(remoteTable);
    expect((await sql(`SELECT value FROM '${remoteTable}'`)).dataset).toEqual([[111]]);
    const claims = await sql(`SELECT instance FROM harbor_site_claims WHERE site = '${site}' ORDER BY time`);
    expect(claims.dataset.map(([instance]) => instance)).toEqual([
      (await status(first)).identity!.instance,
      (await status(clone)).identity!.instance,
    ]);

    // Renamed: its new readings go under the new name, the one it answered as the old one is set aside.
    await clone.stop();
    gateways.splice(gateways.indexOf(clone), 1);
    const renamed = await start({ ...remote, SITE_ID: `${site}_b`, DATA_DIR: cloneDir });
    expect((await renamed.post('/api/v2/ingest/batch', [reading(2, 444)])).status).toBe(200);
    await waitUntil('the renamed gateway delivered', async () => (await sink(renamed, 'remote-questdb')).backlog === 0, 30_000);
    expect(await sink(renamed, 'remote-questdb')).toMatchObject({ deadLettered: 1 });

    // Released by the operator once the first is gone: the next gateway writing under the site owns it.
    await first.stop();
    gateways.splice(gateways.indexOf(first), 1);
    await sql(`INSERT INTO harbor_site_claims (time, site, kind) VALUES (now(), '${site}', 'release')`);
    const replacement = await start({ ...remote, SITE_ID: site });
    expect((await replacement.post('/api/v2/ingest/batch', [reading(3, 555)])).status).toBe(200);
    await waitUntil('the replacement delivered', async () => (await sink(replacement, 'remote-questdb')).backlog === 0, 30_000);
    await waitForWalApplied(remoteTable);
    expect((await sql(`SELECT site, value FROM '${remoteTable}' ORDER BY time`)).dataset).toEqual([
      [site, 111],
      [`${site}_b`, 444],
      [site, 555],
    ]);
  });
});
