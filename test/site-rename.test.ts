// A site renamed (SITE_ID changed and the gateway restarted) within the replay window: every
// reading keeps the name it was answered under, in the site's own QuestDB, at the central gateway
// its upstream sink forwards to, in the remote QuestDB (the suite's QuestDB behind a TLS proxy
// that wants a token, as QuestDB Enterprise would) and in Kafka. The restart sends the readings
// the sinks keep again, which must land on the same rows, under the old name.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { GatewaySnapshot } from '../src/health/snapshot.js';
import { createTopic, kafkaForTests, readTopic } from './support/kafka.js';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, uniqueTable, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { TlsTokenProxy } from './support/tls-proxy.js';
import { waitUntil } from './support/wait.js';

const TOKEN = 'rename-remote-token-0123456789';
const BASE_MS = Date.UTC(2026, 10, 20, 8, 0, 0);
const kafka = kafkaForTests();

/** Readings `from` to `to - 1`: one a second of one series, each value its number. */
const readings = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, k) => ({
    time: new Date(BASE_MS + (from + k) * 1000).toISOString(),
    ship_id: 'pump-1',
    cargo_id: 'pressure',
    value: from + k,
  }));

const status = async (gw: TestGateway): Promise<GatewaySnapshot> =>
  (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json() as Promise<GatewaySnapshot>;

/** Every sink delivered everything queued. */
const delivered = async (gw: TestGateway): Promise<boolean> => (await status(gw)).sinks.every((s) => s.backlog === 0);

/** The rows of a table by site: how many, and how many distinct readings. */
async function bySite(table: string, rows: number): Promise<[string, number, number][]> {
  await waitForCount(`SELECT count() FROM "${table}"`, rows, 30_000);
  // Sent again after the restart: give a replay that would add rows the time to land.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await waitForWalApplied(table, 30_000);
  return (await sql<[string, number, number]>(`SELECT site, count(), count_distinct(time) FROM "${table}" ORDER BY site`)).dataset;
}

describe('a site renamed within the replay window', () => {
  let proxy: TlsTokenProxy;
  let central: TestGateway;
  const running: TestGateway[] = [];
  const dir = tempDir('rename');

  beforeAll(async () => {
    proxy = await TlsTokenProxy.start(inject('questdbUrl'), TOKEN);
    central = await startTestGateway({ SITE_ID: 'centre' });
  });

  afterAll(async () => {
    for (const gw of running) await gw.stop();
    await central?.stop();
    await proxy?.close();
  });

  it('keeps each reading under the name it was answered under, in every sink, and sends the kept ones again under it', async () => {
    const topic = `rename-${Date.now()}`;
    await createTopic(kafka.broker.bootstrap, topic, 3);
    const remoteTable = uniqueTable('rename_remote');
    const names = { old: uniqueTable('old_name'), new: uniqueTable('new_name') };
    const tokenFile = join(dir, 'token');
    const caFile = join(dir, 'ca.pem');
    writeFileSync(tokenFile, `${TOKEN}\n`);
    writeFileSync(caFile, proxy.caPem);
    const env = {
      DATA_DIR: tempDir('rename-site'),
      QUESTDB_TABLE: uniqueTable('rename_local'),
      UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: TEST_KEY,
      REMOTE_QUESTDB_URL: proxy.url,
      REMOTE_QUESTDB_TOKEN_FILE: tokenFile,
      REMOTE_QUESTDB_CA_FILE: caFile,
      REMOTE_QUESTDB_TABLE: remoteTable,
      KAFKA_BROKERS: kafka.broker.bootstrap,
      KAFKA_TOPIC: topic,
    };
    // Names of their own: the remote QuestDB's site claims are shared with other tests' gateways.
    const before = await startTestGateway({ ...env, SITE_ID: names.old });
    running.push(before);
    expect((await before.post('/api/v2/ingest/batch', readings(0, 20))).status).toBe(200);
    await waitUntil('every sink of the old name delivered', () => delivered(before), 60_000);
    await before.stop();
    running.pop();

    // Within the replay window: the local and remote QuestDB sinks still keep what they delivered.
    const after = await startTestGateway({ ...env, SITE_ID: names.new });
    running.push(after);
    expect((await after.post('/api/v2/ingest/batch', readings(20, 40))).status).toBe(200);
    await waitUntil('every sink of the new name delivered', () => delivered(after), 60_000);
    await waitForDrained(central, 30_000);

    const expected = [
      [names.new, 20, 20],
      [names.old, 20, 20],
    ].sort((a, b) => String(a[0]).localeCompare(String(b[0])));
    expect(await bySite(after.table, 40)).toEqual(expected);
    expect(await bySite(remoteTable, 40)).toEqual(expected);
    expect(await bySite(central.table, 40)).toEqual(expected);
    // Kafka holds each reading at least once, and every copy under its name.
    const sites = new Map<number, Set<string>>();
    for (const message of await readTopic(kafka.broker.bootstrap, topic)) {
      const reading = JSON.parse(message.value) as { value: number; site: string };
      sites.set(reading.value, (sites.get(reading.value) ?? new Set()).add(reading.site));
    }
    expect([...sites.keys()].sort((a, b) => a - b)).toEqual(readings(0, 40).map((r) => r.value));
    for (const [value, found] of sites) expect([...found], `reading ${value}`).toEqual([value < 20 ? names.old : names.new]);
  });
});
