import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { startDevices } from '../scripts/lib/device-load.mjs';
import { FaultProxy } from './support/fault-proxy.js';
import { TEST_KEY } from './support/gateway.js';
import { spawnGateway } from './support/process.js';
import { storedCounts, uniqueTable } from './support/questdb-sql.js';

const MAX_PEAK_RSS_MB = 200;
const peakRssMb = (pid: number): number => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('QuestDB that does not answer, or answers slowly', () => {
  it('keeps accepting with bounded memory and one flush in flight, then delivers everything once', async () => {
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    const table = uniqueTable('slow');
    const gw = await spawnGateway({
      API_KEY: TEST_KEY,
      DATA_DIR: mkdtempSync(join(tmpdir(), 'harbor-slow-')),
      QUESTDB_URL: proxy.url,
      QUESTDB_TABLE: table,
      FLUSH_INTERVAL_MS: '50',
      FLUSH_TIMEOUT_MS: '500',
      FLUSH_BACKOFF_MAX_MS: '300',
      FLUSH_BATCH_READINGS: '2000',
      HEALTH_REPORT: 'false',
    });
    const status = async () =>
      (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { queue: { readings: number }; flush: { consecutiveFailures: number } };
    const load = startDevices({ url: gw.url, apiKey: TEST_KEY, date: '2026-08-01', batchSize: 100 });
    try {
      proxy.set('stall');
      await new Promise((r) => setTimeout(r, 3000));
      const stalled = await status();
      expect(stalled.queue.readings).toBeGreaterThan(10_000);
      expect(stalled.flush.consecutiveFailures).toBeGreaterThan(1);
      expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);

      proxy.set('pass', 300);
      await new Promise((r) => setTimeout(r, 2000));
      proxy.set('pass');
    } finally {
      await load.stop();
    }
    expect(load.refused).toBe(0);
    expect(proxy.maxOpen).toBeLessThanOrEqual(2);
    // Bounded: the heaps are capped (scripts/lib/node-options.mjs, the flusher thread's limits), far
    // below the systemd unit's MemoryMax of 256 MB however long QuestDB stalls.
    expect(peakRssMb(gw.child.pid!)).toBeLessThan(MAX_PEAK_RSS_MB);

    const deadline = Date.now() + 30_000;
    while ((await status()).queue.readings > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    gw.child.kill('SIGTERM');
    await gw.exited;
    await proxy.close();
    expect(await storedCounts(table)).toEqual({ rows: load.accepted, distinct: load.accepted });
  }, 60_000);
});
