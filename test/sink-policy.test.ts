import { afterAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../scripts/lib/ports.mjs';
import { killAll, spawnGateway, type GatewayProcess } from './support/process.js';
import { sql, storedCounts, uniqueTable } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

// A remote sink whose destination is away for good, and a queue bound of 1 MiB: with `drop_oldest`
// the site keeps answering 200, the upstream sink skips its oldest readings (counted), and the local
// QuestDB still gets every reading; with `block` the queue fills and ingest answers 503.

const KEY = 'policy-key-0123456789';
const processes: GatewayProcess[] = [];
afterAll(async () => {
  await killAll(processes);
});

interface SinkStatus {
  name: string;
  backlog: number;
  dropped: number;
  delivered: number;
}

async function site(policy: 'block' | 'drop_oldest', table: string, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const p = await spawnGateway({
    API_KEY: KEY,
    DATA_DIR: tempDir('policy'),
    QUESTDB_URL: inject('questdbUrl'),
    QUESTDB_TABLE: table,
    DURABILITY: 'process-crash',
    HEALTH_REPORT: 'false',
    FLUSH_INTERVAL_MS: '50',
    QUEUE_MAX_BYTES: '1MiB',
    // Nothing listens there: the uplink is down for the whole test.
    UPSTREAM_URL: `http://127.0.0.1:${await freePort()}/api/v2/ingest/batch`,
    UPSTREAM_API_KEY: 'central-key-0123456789',
    UPSTREAM_POLICY: policy,
    ...env,
  });
  processes.push(p);
  return p;
}

/**
 * Posts `batches` batches of 100 readings of 100-character ids, 10 ms apart (the local sink, which
 * never drops, keeps up at that pace); returns the status codes, and the bodies of refusals.
 */
async function post(p: GatewayProcess, batches: number, tag: string, from = 0, refusals: string[] = []): Promise<number[]> {
  const codes: number[] = [];
  const pad = 'x'.repeat(90);
  for (let b = from; b < from + batches; b++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    const body = Array.from({ length: 100 }, (_, i) => ({
      time: new Date(Date.UTC(2026, 10, 20) + (b * 100 + i) * 1000).toISOString(),
      ship_id: `${tag}-${pad}`,
      cargo_id: 'fill',
      value: b * 100 + i,
    }));
    const response = await fetch(`${p.url}/api/v2/ingest/batch`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== 200) refusals.push(text);
    codes.push(response.status);
  }
  return codes;
}

async function sinks(p: GatewayProcess): Promise<Record<string, SinkStatus>> {
  const status = (await (await fetch(`${p.url}/status`, { headers: { 'x-api-key': KEY } })).json()) as { sinks: SinkStatus[] };
  return Object.fromEntries(status.sinks.map((s) => [s.name, s]));
}

describe('a remote sink away for good, with a full queue', () => {
  it('drop_oldest: every request answered 200, the upstream sink skips its oldest readings, the local QuestDB gets them all', async () => {
    const table = uniqueTable('policy_drop');
    const gw = await site('drop_oldest', table);
    // The local sink has its table and flows before the load (a queue full behind it is a 503 by design).
    expect(await post(gw, 1, 'drop')).toEqual([200]);
    await expect.poll(async () => (await sinks(gw))['questdb']?.delivered, { timeout: 30_000 }).toBe(100);
    // About 3 MiB of readings through a 1 MiB queue.
    const codes = await post(gw, 149, 'drop', 1);
    expect(codes.filter((c) => c !== 200)).toEqual([]);
    await expect.poll(async () => (await sinks(gw))['questdb']?.backlog, { timeout: 30_000 }).toBe(0);
    const status = await sinks(gw);
    expect(status['upstream']?.delivered).toBe(0);
    expect(status['upstream']?.dropped).toBeGreaterThan(0);
    // What the upstream sink still holds plus what it skipped is every reading answered.
    expect((status['upstream']?.backlog ?? 0) + (status['upstream']?.dropped ?? 0)).toBe(15_000);
    await expect.poll(() => storedCounts(table), { timeout: 30_000 }).toEqual({ rows: 15_000, distinct: 15_000 });
  });

  it('block: the queue fills and ingest answers 503; nothing is skipped', async () => {
    const gw = await site('block', uniqueTable('policy_block'));
    expect(await post(gw, 1, 'block')).toEqual([200]);
    await expect.poll(async () => (await sinks(gw))['questdb']?.delivered, { timeout: 30_000 }).toBe(100);
    const codes = await post(gw, 149, 'block', 1);
    expect(codes).toContain(503);
    expect(codes.filter((c) => c !== 200 && c !== 503)).toEqual([]);
    expect((await sinks(gw))['upstream']?.dropped).toBe(0);
  });

  it('block: while the upstream holds the full queue, the 503, /status, /readyz and every health row say so, without flapping', async () => {
    const gateway = uniqueTable('policy_truth');
    const gw = await site('block', uniqueTable('policy_truth'), {
      GATEWAY_NAME: gateway,
      HEALTH_REPORT: 'true',
      HOUSEKEEPING_CRON: '* * * * * *',
    });
    expect(await post(gw, 1, 'truth')).toEqual([200]);
    await expect.poll(async () => (await sinks(gw))['questdb']?.delivered, { timeout: 30_000 }).toBe(100);
    const filling = await post(gw, 149, 'truth', 1);
    const full = filling.indexOf(503);
    expect(full).toBeGreaterThan(0);
    // Once full, the queue refuses every request until the upstream makes room: it never does here.
    expect(filling.slice(full).filter((c) => c !== 503)).toEqual([]);

    const since = Date.now();
    const refusals: string[] = [];
    const readyz: number[] = [];
    const sampler = setInterval(() => {
      void fetch(`${gw.url}/readyz`).then((r) => readyz.push(r.status));
    }, 100);
    try {
      // At least three housekeeping runs (health rows, totals refreshed) while devices keep posting.
      const codes: number[] = [];
      for (let from = 150; Date.now() - since < 3_500; from += 50) codes.push(...(await post(gw, 50, 'truth', from, refusals)));
      expect(codes.filter((c) => c !== 503)).toEqual([]);
    } finally {
      clearInterval(sampler);
    }
    expect(readyz.length).toBeGreaterThan(20);
    expect(readyz.filter((c) => c !== 503)).toEqual([]);
    expect(JSON.parse(refusals[0]!).message).toMatch(
      /^The gateway queue is full while upstream 127\.0\.0\.1:\d+ catches up \(upstream 127\.0\.0\.1:\d+ unreachable for \d+ s; [\d,]+ readings to deliver, the oldest \d+ s old\); retry later$/,
    );
    const status = (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': KEY } })).json()) as {
      ready: boolean;
      queue: { heldBy: string | null };
    };
    expect(status).toMatchObject({ ready: false, queue: { heldBy: 'upstream' } });

    const rows = (
      await sql<[boolean, string, string]>(
        `SELECT ready, state, state_text FROM gateway_health WHERE gateway = '${gateway}' AND time > ${since * 1000} ORDER BY time`,
      )
    ).dataset;
    expect(rows.length).toBeGreaterThanOrEqual(3);
    for (const [ready, state, text] of rows) {
      expect([ready, state]).toEqual([false, 'refusing']);
      expect(text).toMatch(/^refusing readings — upstream 127\.0\.0\.1:\d+ unreachable for \d+ s, queue full/);
    }
  }, 120_000);
});
