import { closeSync, copyFileSync, existsSync, openSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, inject, it } from 'vitest';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { FaultProxy } from './support/fault-proxy.js';
import { TEST_KEY } from './support/gateway.js';
import { storedCounts, uniqueTable } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

/**
 * The data directory is a small tmpfs in a private mount namespace (unshare, no privileges needed
 * beyond user namespaces), so the disk fills long before the queue bound, with QuestDB behind a
 * proxy that refuses until the test lets it through. The first case takes part of the disk with a
 * ballast file ("space returns" is removing it); the second fills it with the queue alone; in the
 * third something else takes the last byte.
 */
async function gatewayOnTmpfs(label: string, sizeMb: number, env: Record<string, string> = {}) {
  const dataDir = tempDir(label);
  const proxy = await FaultProxy.start(inject('questdbUrl'));
  proxy.set('refuse');
  const table = uniqueTable(label);
  const gateway = await startGatewayProcess({
    bundle: inject('bundlePath'),
    // The gateway starts inside its own mount namespace, on a tmpfs mounted over its data directory.
    wrap: ['unshare', '--map-root-user', '--mount', 'sh', '-c', `mount -t tmpfs -o size=${sizeMb}m tmpfs "$DATA_DIR" && exec "$@"`, 'sh'],
    env: {
      API_KEY: TEST_KEY,
      DATA_DIR: dataDir,
      QUESTDB_URL: proxy.url,
      QUESTDB_TABLE: table,
      QUEUE_MAX_BYTES: '1GiB',
      FLUSH_INTERVAL_MS: '50',
      FLUSH_BACKOFF_MAX_MS: '250',
      HEALTH_REPORT: 'false',
      RETENTION_DAYS: '0',
      ...env,
    },
    timeoutMs: 10_000,
  });
  const { url } = gateway;
  let accepted = 0;
  let sequence = 0;
  return {
    ...gateway,
    proxy,
    table,
    // The tmpfs is visible only inside the gateway's mount namespace, reachable through /proc.
    inside: `/proc/${gateway.child.pid}/root${dataDir}`,
    get accepted() {
      return accepted;
    },
    /** 100 readings of distinct times; the answer's status, problem type and Retry-After. */
    async postBatch() {
      const batch = Array.from({ length: 100 }, () => {
        const n = sequence++;
        return {
          time: `2026-09-01T00:00:00.${String(n).padStart(9, '0')}Z`,
          ship_id: label,
          cargo_id: `metric-with-a-long-name-${n % 50}`,
          value: n,
        };
      });
      const response = await fetch(`${url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'x-api-key': TEST_KEY },
        body: JSON.stringify(batch),
      });
      const answer = (await response.json()) as { details?: { type: string }[] };
      if (response.status === 200) accepted += batch.length;
      return { status: response.status, type: answer.details?.[0]?.type, retryAfter: response.headers.get('retry-after') };
    },
    ready: async () => (await fetch(`${url}/readyz`)).status,
    queued: async () =>
      ((await (await fetch(`${url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { queue: { readings: number } }).queue
        .readings,
    /** After a failed step: stops the gateway and the proxy, so that step's error is the one reported. */
    async abandon() {
      gateway.child.kill('SIGKILL');
      await gateway.exited;
      await proxy.close();
    },
    /** SIGTERM; exits 0, and every reading answered 200 is in QuestDB once. */
    async stop() {
      gateway.child.kill('SIGTERM');
      const { code } = await gateway.exited;
      if (code !== 0) console.log(gateway.stderr(), JSON.stringify(gateway.logs.slice(-20)));
      await proxy.close();
      expect(code).toBe(0);
      expect(await storedCounts(table)).toEqual({ rows: accepted, distinct: accepted });
    },
  };
}

describe('full disk (ENOSPC on the data directory)', () => {
  it('answers 503 with a clear error, corrupts nothing and recovers by itself when space returns', async () => {
    const gw = await gatewayOnTmpfs('enospc', 4);
    const ballast = join(gw.inside, 'ballast');
    writeFileSync(ballast, Buffer.alloc(2 * 1024 * 1024, 1));
    // SQLite resolves the /proc link to this namespace's empty directory, so check a copy; nothing
    // writes the queue between requests while QuestDB is refused.
    const integrity = () => {
      const copy = tempDir('enospc-copy');
      for (const file of ['queue.db', 'queue.db-wal']) {
        if (existsSync(join(gw.inside, file))) copyFileSync(join(gw.inside, file), join(copy, file));
      }
      const db = new Database(join(copy, 'queue.db'), { fileMustExist: true });
      try {
        return db.pragma('integrity_check', { simple: true });
      } finally {
        db.close();
      }
    };
    try {
      let refusal: Awaited<ReturnType<typeof gw.postBatch>> | undefined;
      for (let i = 0; i < 2000 && refusal === undefined; i++) {
        const result = await gw.postBatch();
        if (result.status !== 200) refusal = result;
      }
      expect(refusal).toEqual({ status: 503, type: 'queue_disk_full', retryAfter: '60' });
      expect(gw.accepted).toBeGreaterThan(1000);
      expect(await gw.postBatch()).toMatchObject({ status: 503, type: 'queue_disk_full' });
      expect(await gw.ready()).toBe(503);
      expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
      expect(integrity()).toBe('ok');
      // The log line comes through a pipe and can trail the answer.
      await waitUntil('the disk-full log line', () =>
        gw.logs.some((l) => l['event'] === 'queue_write_failed' && l['refusal'] === 'disk_full'),
      );

      unlinkSync(ballast);
      expect((await gw.postBatch()).status).toBe(200);

      gw.proxy.set('pass');
      await waitUntil('the queue drained', async () => (await gw.queued()) === 0, 30_000);
    } catch (error) {
      await gw.abandon();
      throw error;
    }
    await gw.stop();
  }, 60_000);

  it('delivers a backlog that filled the disk itself once QuestDB is back, says not ready meanwhile, and takes readings again', async () => {
    const gw = await gatewayOnTmpfs('selffull', 6, { REPLAY_WINDOW_MS: '3000', DURABILITY: 'power-loss' });
    try {
      // Four devices at once, each commit synced: many small commits, so the log holds many pages.
      let refusal: Awaited<ReturnType<typeof gw.postBatch>> | undefined;
      const device = async () => {
        for (let i = 0; i < 5_000 && refusal === undefined; i++) {
          const result = await gw.postBatch();
          if (result.status !== 200) refusal ??= result;
        }
      };
      await Promise.all([device(), device(), device(), device()]);
      expect(refusal).toMatchObject({ status: 503, type: 'queue_disk_full' });
      expect(gw.accepted).toBeGreaterThan(5000);
      // The log was folded into the queue file before the first refusal, so no later fold makes
      // room: every request is refused and the gateway is not ready until QuestDB takes the backlog.
      const answers: number[] = [];
      for (const until = Date.now() + 3_000; Date.now() < until; ) {
        answers.push((await gw.postBatch()).status, await gw.ready());
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(answers.filter((status) => status !== 503)).toEqual([]);
      // Not ready while ingest cannot write, also once no request has tried for a while.
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      expect(await gw.ready()).toBe(503);

      gw.proxy.set('pass');
      await waitUntil('the backlog delivered', async () => (await gw.queued()) === 0, 60_000);
      await waitUntil('ready again', async () => (await gw.ready()) === 200, 30_000);
      await waitUntil('readings taken again', async () => (await gw.postBatch()).status === 200, 30_000);
      // The delivery thread never died, and did not send its kept readings again and again.
      expect(gw.logs.filter((l) => l['event'] === 'delivery_exited' || l['event'] === 'delivery_crashed')).toEqual([]);
      expect(gw.logs.filter((l) => l['event'] === 'replay').length).toBeLessThanOrEqual(1);
      await waitUntil('the new readings delivered', async () => (await gw.queued()) === 0, 30_000);
    } catch (error) {
      await gw.abandon();
      throw error;
    }
    await gw.stop();
  }, 180_000);

  it('takes readings again within 5 s of its backlog leaving the disk, though the local sink keeps a replay window', async () => {
    // The default window (60 s): what it keeps would hold the delivered segments, and the disk, that long.
    const gw = await gatewayOnTmpfs('fullwindow', 6);
    try {
      let refused = false;
      const device = async () => {
        for (let i = 0; i < 5_000 && !refused; i++) if ((await gw.postBatch()).status !== 200) refused = true;
      };
      await Promise.all([device(), device()]);
      expect(refused).toBe(true);
      gw.proxy.set('pass');
      await waitUntil('the backlog delivered', async () => (await gw.queued()) === 0, 60_000);
      const drained = performance.now();
      while ((await gw.postBatch()).status !== 200) {
        expect(performance.now() - drained).toBeLessThan(5_000);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(gw.logs.some((l) => l['event'] === 'replay_window_cut' && l['sink'] === 'questdb')).toBe(true);
      await waitUntil('the new readings delivered', async () => (await gw.queued()) === 0, 30_000);
    } catch (error) {
      await gw.abandon();
      throw error;
    }
    await gw.stop();
  }, 120_000);

  it('delivers its backlog when something else took the last byte of the disk, and takes readings again once that is gone', async () => {
    const gw = await gatewayOnTmpfs('otherfull', 8, { REPLAY_WINDOW_MS: '0' });
    const ballast = join(gw.inside, 'ballast');
    // Another program fills every byte left (a log, QuestDB on the same disk), also what the
    // gateway gives back when it notices (its log folded into the queue file).
    const fill = () => {
      const fd = openSync(ballast, 'a');
      try {
        for (;;) writeSync(fd, Buffer.alloc(4096, 1));
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC');
      } finally {
        closeSync(fd);
      }
    };
    try {
      for (let i = 0; i < 200; i++) expect((await gw.postBatch()).status).toBe(200);
      expect(existsSync(join(gw.inside, 'queue.reserve'))).toBe(true);
      fill();
      expect((await gw.postBatch()).status).toBe(503);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect((await gw.postBatch()).status).toBe(503);
      fill();
      expect(await gw.ready()).toBe(503);

      gw.proxy.set('pass');
      // In the log's room, or, when that is taken too, in the reserve's (queue_reserve_used).
      await waitUntil('the backlog delivered', async () => (await gw.queued()) === 0, 60_000);
      expect(gw.logs.filter((l) => l['event'] === 'delivery_exited')).toEqual([]);
      expect(await gw.ready()).toBe(503);

      unlinkSync(ballast);
      await waitUntil('ready again, the reserve made again', async () => (await gw.ready()) === 200, 30_000);
      expect(existsSync(join(gw.inside, 'queue.reserve'))).toBe(true);
      expect((await gw.postBatch()).status).toBe(200);
      await waitUntil('the new readings delivered', async () => (await gw.queued()) === 0, 30_000);
    } catch (error) {
      await gw.abandon();
      throw error;
    }
    await gw.stop();
  }, 180_000);
});
