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
 * The data directory is a 4 MiB tmpfs in a private mount namespace (unshare, no privileges needed
 * beyond user namespaces), part of it taken by a ballast file, so the disk fills long before the
 * queue bound. Removing the ballast is "space returns". The second case fills a 6 MiB tmpfs with
 * the queue alone, QuestDB away, and lets QuestDB back.
 */
describe('full disk (ENOSPC on the data directory)', () => {
  it('answers 503 with a clear error, corrupts nothing and recovers by itself when space returns', async () => {
    const dataDir = tempDir('enospc');
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    proxy.set('refuse');
    const table = uniqueTable('enospc');
    const { child, url, logs, stderr, exited } = await startGatewayProcess({
      bundle: inject('bundlePath'),
      // The gateway starts inside its own mount namespace, on a tmpfs mounted over its data directory.
      wrap: ['unshare', '--map-root-user', '--mount', 'sh', '-c', 'mount -t tmpfs -o size=4m tmpfs "$DATA_DIR" && exec "$@"', 'sh'],
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
      },
      timeoutMs: 10_000,
    });
    // The tmpfs is visible only inside the gateway's mount namespace, reachable through /proc.
    const inside = `/proc/${child.pid}/root${dataDir}`;
    const ballast = join(inside, 'ballast');
    writeFileSync(ballast, Buffer.alloc(2 * 1024 * 1024, 1));
    // SQLite resolves the /proc link to this namespace's empty directory, so check a copy; nothing
    // writes the queue between requests while QuestDB is refused.
    const integrity = () => {
      const copy = tempDir('enospc-copy');
      for (const file of ['queue.db', 'queue.db-wal']) {
        if (existsSync(join(inside, file))) copyFileSync(join(inside, file), join(copy, file));
      }
      const db = new Database(join(copy, 'queue.db'), { fileMustExist: true });
      try {
        return db.pragma('integrity_check', { simple: true });
      } finally {
        db.close();
      }
    };

    let accepted = 0;
    let sequence = 0;
    const postBatch = async () => {
      const batch = Array.from({ length: 100 }, () => {
        const n = sequence++;
        return {
          time: `2026-09-01T00:00:00.${String(n).padStart(9, '0')}Z`,
          ship_id: 'disk',
          cargo_id: `metric-with-a-long-name-${n % 50}`,
          value: n,
        };
      });
      const response = await fetch(`${url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'x-api-key': TEST_KEY },
        body: JSON.stringify(batch),
      });
      const body = (await response.json()) as { details?: { type: string }[] };
      if (response.status === 200) accepted += batch.length;
      return { status: response.status, type: body.details?.[0]?.type, retryAfter: response.headers.get('retry-after') };
    };

    try {
      let refusal: Awaited<ReturnType<typeof postBatch>> | undefined;
      for (let i = 0; i < 2000 && refusal === undefined; i++) {
        const result = await postBatch();
        if (result.status !== 200) refusal = result;
      }
      expect(refusal).toEqual({ status: 503, type: 'queue_disk_full', retryAfter: '60' });
      expect(accepted).toBeGreaterThan(1000);
      expect(await postBatch()).toMatchObject({ status: 503, type: 'queue_disk_full' });
      expect((await fetch(`${url}/readyz`)).status).toBe(503);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect(integrity()).toBe('ok');
      // The log line comes through a pipe and can trail the answer.
      await waitUntil('the disk-full log line', () =>
        logs.some((l) => l['event'] === 'queue_write_failed' && l['refusal'] === 'disk_full'),
      );

      unlinkSync(ballast);
      expect((await postBatch()).status).toBe(200);

      proxy.set('pass');
      const drainedBy = Date.now() + 30_000;
      for (;;) {
        const status = (await (await fetch(`${url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
          queue: { readings: number };
        };
        if (status.queue.readings === 0) break;
        if (Date.now() > drainedBy) throw new Error(`queue did not drain: ${status.queue.readings}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      child.kill('SIGTERM');
      const { code } = await exited;
      if (code !== 0) console.log(stderr(), JSON.stringify(logs.slice(-20)));
      expect(code).toBe(0);
      await proxy.close();
    }
    expect(await storedCounts(table)).toEqual({ rows: accepted, distinct: accepted });
  }, 60_000);

  it('delivers a backlog that filled the disk itself once QuestDB is back, says not ready meanwhile, and takes readings again', async () => {
    const dataDir = tempDir('selffull');
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    proxy.set('refuse');
    const table = uniqueTable('selffull');
    const { child, url, logs, stderr, exited } = await startGatewayProcess({
      bundle: inject('bundlePath'),
      wrap: ['unshare', '--map-root-user', '--mount', 'sh', '-c', 'mount -t tmpfs -o size=6m tmpfs "$DATA_DIR" && exec "$@"', 'sh'],
      env: {
        API_KEY: TEST_KEY,
        DATA_DIR: dataDir,
        QUESTDB_URL: proxy.url,
        QUESTDB_TABLE: table,
        QUEUE_MAX_BYTES: '1GiB',
        FLUSH_INTERVAL_MS: '50',
        FLUSH_BACKOFF_MAX_MS: '250',
        REPLAY_WINDOW_MS: '3000',
        HEALTH_REPORT: 'false',
        RETENTION_DAYS: '0',
      },
      timeoutMs: 10_000,
    });
    let accepted = 0;
    let sequence = 0;
    const postBatch = async () => {
      const batch = Array.from({ length: 100 }, () => {
        const n = sequence++;
        return { time: `2026-09-02T00:00:00.${String(n).padStart(9, '0')}Z`, ship_id: 'selffull', cargo_id: `metric-${n % 50}`, value: n };
      });
      const response = await fetch(`${url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'x-api-key': TEST_KEY },
        body: JSON.stringify(batch),
      });
      const body = (await response.json()) as { details?: { type: string }[] };
      if (response.status === 200) accepted += batch.length;
      return { status: response.status, type: body.details?.[0]?.type };
    };
    const ready = async () => (await fetch(`${url}/readyz`)).status;
    const queued = async () =>
      ((await (await fetch(`${url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { queue: { readings: number } }).queue
        .readings;
    try {
      // Until the disk is full for good: the first refusals may still be followed by a few answers,
      // once the log the queue had written was folded into the queue file.
      let refusal: Awaited<ReturnType<typeof postBatch>> | undefined;
      let refusedSince: number | undefined;
      for (let i = 0; i < 10_000 && (refusedSince === undefined || Date.now() - refusedSince < 3_000); i++) {
        const result = await postBatch();
        if (result.status === 200) refusedSince = undefined;
        else {
          refusal ??= result;
          refusedSince ??= Date.now();
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      expect(refusal).toEqual({ status: 503, type: 'queue_disk_full' });
      expect(accepted).toBeGreaterThan(5000);
      // Not ready while ingest cannot write, also once no request has tried for a while.
      expect(await ready()).toBe(503);
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      expect(await ready()).toBe(503);

      proxy.set('pass');
      await waitUntil('the backlog delivered', async () => (await queued()) === 0, 60_000);
      await waitUntil('ready again', async () => (await ready()) === 200, 30_000);
      await waitUntil('readings taken again', async () => (await postBatch()).status === 200, 30_000);
      // The delivery thread never died, and did not send its kept readings again and again.
      expect(logs.filter((l) => l['event'] === 'delivery_exited' || l['event'] === 'delivery_crashed')).toEqual([]);
      expect(logs.filter((l) => l['event'] === 'replay').length).toBeLessThanOrEqual(1);
      await waitUntil('the new readings delivered', async () => (await queued()) === 0, 30_000);
    } finally {
      child.kill('SIGTERM');
      const { code } = await exited;
      if (code !== 0) console.log(stderr(), JSON.stringify(logs.slice(-20)));
      await proxy.close();
    }
    expect(await storedCounts(table)).toEqual({ rows: accepted, distinct: accepted });
  }, 180_000);

  it('delivers its backlog when something else took the last byte of the disk, and takes readings again once that is gone', async () => {
    const dataDir = tempDir('otherfull');
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    proxy.set('refuse');
    const table = uniqueTable('otherfull');
    const { child, url, logs, stderr, exited } = await startGatewayProcess({
      bundle: inject('bundlePath'),
      wrap: ['unshare', '--map-root-user', '--mount', 'sh', '-c', 'mount -t tmpfs -o size=8m tmpfs "$DATA_DIR" && exec "$@"', 'sh'],
      env: {
        API_KEY: TEST_KEY,
        DATA_DIR: dataDir,
        QUESTDB_URL: proxy.url,
        QUESTDB_TABLE: table,
        FLUSH_INTERVAL_MS: '50',
        FLUSH_BACKOFF_MAX_MS: '250',
        REPLAY_WINDOW_MS: '0',
        HEALTH_REPORT: 'false',
        RETENTION_DAYS: '0',
      },
      timeoutMs: 10_000,
    });
    const inside = `/proc/${child.pid}/root${dataDir}`;
    let accepted = 0;
    let sequence = 0;
    const postBatch = async () => {
      const batch = Array.from({ length: 100 }, () => {
        const n = sequence++;
        return { time: `2026-09-03T00:00:00.${String(n).padStart(9, '0')}Z`, ship_id: 'otherfull', cargo_id: `metric-${n % 50}`, value: n };
      });
      const response = await fetch(`${url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'x-api-key': TEST_KEY },
        body: JSON.stringify(batch),
      });
      await response.arrayBuffer();
      if (response.status === 200) accepted += batch.length;
      return response.status;
    };
    const queued = async () =>
      ((await (await fetch(`${url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { queue: { readings: number } }).queue
        .readings;
    try {
      for (let i = 0; i < 200; i++) expect(await postBatch()).toBe(200);
      expect(existsSync(join(inside, 'queue.reserve'))).toBe(true);
      // Another program fills every byte left (a log, QuestDB on the same disk), also what the
      // gateway gives back when it notices (its log folded into the queue file).
      const ballast = join(inside, 'ballast');
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
      fill();
      expect(await postBatch()).toBe(503);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await postBatch()).toBe(503);
      fill();
      expect((await fetch(`${url}/readyz`)).status).toBe(503);

      proxy.set('pass');
      // In the log's room, or, when that is taken too, in the reserve's (queue_reserve_used).
      await waitUntil('the backlog delivered', async () => (await queued()) === 0, 60_000);
      expect(logs.filter((l) => l['event'] === 'delivery_exited')).toEqual([]);
      expect((await fetch(`${url}/readyz`)).status).toBe(503);

      unlinkSync(ballast);
      await waitUntil('ready again, the reserve made again', async () => (await fetch(`${url}/readyz`)).status === 200, 30_000);
      expect(existsSync(join(inside, 'queue.reserve'))).toBe(true);
      expect(await postBatch()).toBe(200);
      await waitUntil('the new readings delivered', async () => (await queued()) === 0, 30_000);
    } finally {
      child.kill('SIGTERM');
      const { code } = await exited;
      if (code !== 0) console.log(stderr(), JSON.stringify(logs.slice(-20)));
      await proxy.close();
    }
    expect(await storedCounts(table)).toEqual({ rows: accepted, distinct: accepted });
  }, 180_000);
});
