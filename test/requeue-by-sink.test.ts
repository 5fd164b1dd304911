import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashKey } from '../src/keys/key-hash.js';
import { writeKeyFile } from '../src/keys/key-file.js';
import { DeadLetterStore } from '../src/queue/dead-letters.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

// A site forwarding to a central gateway whose key for it allows only ships starting with `ok-`,
// as docs/fleet.md advises: one reading of another ship is refused with 403 naming it. That
// reading alone becomes a dead letter of the upstream sink; the rest arrives. Re-queued once the
// key allows it, it goes to the upstream alone: the local QuestDB, which stored it already, passes it.

const SITE_KEY = 'site-key-for-central-0123';
const started: TestGateway[] = [];
afterAll(async () => {
  for (const gw of started.reverse()) await gw.stop();
});

describe('a reading the centre refuses with 403 naming it', () => {
  it('is one dead letter of the upstream sink, counted once however often it is re-queued and refused; re-queued, it reaches the upstream only', async () => {
    const keyFile = join(tempDir('requeue-keys'), 'api-keys');
    writeKeyFile(keyFile, [{ name: 'site', hash: hashKey(SITE_KEY), shipPrefix: 'ok-' }]);
    const central = await startTestGateway({ API_KEYS_FILE: keyFile, API_KEYS_POLL_MS: '100' });
    started.push(central);
    // A site id of its own: under the central gateway's (both the host name) it would be refused as a second gateway.
    const site = await startTestGateway({
      SITE_ID: 'requeue-site',
      UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: SITE_KEY,
    });
    started.push(site);

    const batch = ['ok-1', 'ok-2', 'stray-1', 'ok-3', 'ok-4'].map((ship, i) => ({
      time: `2026-11-25T14:00:0${i}Z`,
      ship_id: ship,
      cargo_id: 'level',
      value: i,
    }));
    expect((await site.post('/api/v2/ingest/batch', batch)).status).toBe(200);
    const sinks = () => site.gateway.stats.sinks;
    await waitUntil('the upstream took the batch', async () => sinks().get('upstream')?.taken === 5, 30_000);
    await waitForDrained(site);
    expect(await waitForCount(`SELECT count() FROM "${central.table}"`, 4, 30_000)).toBe(4);
    expect(await waitForCount(`SELECT count() FROM "${site.table}"`, 5, 30_000)).toBe(5);
    expect({ delivered: sinks().get('upstream')?.delivered, deadLettered: sinks().get('upstream')?.deadLettered }).toEqual({
      delivered: 4,
      deadLettered: 1,
    });

    const store = new DeadLetterStore(site.dataDir);
    try {
      const letters = store.list(10);
      expect(letters).toEqual([
        expect.objectContaining({
          sink: 'upstream',
          site: 'requeue-site',
          reason: expect.stringMatching(/^upstream answered 403: .*stray-1/),
        }),
      ]);
      expect(letters[0]!.line.split('\t')[1]).toBe('stray-1');
      // Re-queued while the key still refuses it: a dead letter again, but not a second refusal.
      expect(store.requeue({ ids: 'all', sink: 'upstream' })).toEqual(new Map([['upstream', 1]]));
      await waitUntil('the upstream refused it again', async () => sinks().get('upstream')?.taken === 6, 30_000);
      expect(store.list(10)).toEqual([expect.objectContaining({ sink: 'upstream', line: letters[0]!.line })]);
      expect(sinks().get('upstream')?.deadLettered).toBe(1);
      // The operator lets the key send every ship, then re-queues that sink's letters.
      writeKeyFile(keyFile, [{ name: 'site', hash: hashKey(SITE_KEY) }]);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(store.requeue({ ids: 'all', sink: 'upstream' })).toEqual(new Map([['upstream', 1]]));
    } finally {
      store.close();
    }
    expect(await waitForCount(`SELECT count() FROM "${central.table}"`, 5, 30_000)).toBe(5);
    await waitUntil('the local sink passed both re-queued records', async () => sinks().get('questdb')?.taken === 7, 30_000);
    await waitForWalApplied(site.table);
    expect(await waitForCount(`SELECT count() FROM "${site.table}"`, 5)).toBe(5);
    // Delivered once to each sink: the local QuestDB counts 5 for 5 readings, the upstream 5.
    expect([...sinks()].map(([name, s]) => [name, s.delivered, s.deadLettered])).toEqual([
      ['questdb', 5, 0],
      ['upstream', 5, 1],
    ]);
    const snapshot = (await (await fetch(`${site.url}/status`, { headers: { 'x-api-key': 'test-key-0123456789' } })).json()) as {
      sinks: { name: string; backlog: number }[];
    };
    expect(snapshot.sinks.map((s) => [s.name, s.backlog])).toEqual([
      ['questdb', 0],
      ['upstream', 0],
    ]);
    expect((await sql<[string]>(`SELECT ship_id FROM "${central.table}" WHERE ship_id = 'stray-1'`)).dataset).toEqual([['stray-1']]);
    // Two gateways, two re-queues from another process each picked up by the sinks' 5 s idle poll:
    // 12 s at rest, more than the default 30 s beside the whole suite on two cores.
  }, 120_000);
});
