import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import { startDevices } from '../scripts/lib/device-load.mjs';
import { FaultProxy } from './support/fault-proxy.js';
import { TEST_KEY } from './support/gateway.js';
import { spawnGateway } from './support/process.js';
import { connectionsTo } from './support/tcp-connections.js';
import { storedCounts, uniqueTable } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const MAX_PEAK_RSS_MB = 200;
const peakRssMb = (pid: number): number => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('QuestDB that does not answer, or answers slowly', () => {
  it('keeps accepting with bounded memory and one flush in flight, then delivers everything once', async () => {
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    const table = uniqueTable('slow');
    const gw = await spawnGateway({
      API_KEY: TEST_KEY,
      DATA_DIR: tempDir('slow'),
      QUESTDB_URL: proxy.url,
      QUESTDB_TABLE: table,
      FLUSH_INTERVAL_MS: '50',
      FLUSH_TIMEOUT_MS: '500',
      FLUSH_BACKOFF_MAX_MS: '300',
      FLUSH_BATCH_READINGS: '2000',
      HEALTH_REPORT: 'false',
    });
    // A failed expectation must not leave the gateway running after the test.
    try {
      const status = async () =>
        (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
          queue: { readings: number };
          flush: { consecutiveFailures: number };
        };
      const load = startDevices({ url: gw.url, apiKey: TEST_KEY, date: '2026-08-01', batchSize: 100 });
      // The gateway's own connections to QuestDB (through the proxy), sampled from the kernel.
      let maxConnections = 0;
      const sampler = setInterval(() => (maxConnections = Math.max(maxConnections, connectionsTo(gw.child.pid!, proxy.port))), 10);
      try {
        proxy.set('stall');
        await waitUntil('a backlog of 10,000 readings behind a stalled QuestDB', async () => {
          const stalled = await status();
          return stalled.queue.readings > 10_000 && stalled.flush.consecutiveFailures > 1;
        });
        expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);

        // A while of slow answers (300 ms each), not a condition to wait for.
        proxy.set('pass', 300);
        await new Promise((r) => setTimeout(r, 2000));
        proxy.set('pass');
      } finally {
        await load.stop();
        clearInterval(sampler);
      }
      expect(load.refused).toBe(0);
      expect(maxConnections).toBeGreaterThanOrEqual(1);
      expect(maxConnections).toBeLessThanOrEqual(2);
      // Bounded: the heaps are capped (scripts/lib/node-options.mjs, the flusher thread's limits), far
      // below the systemd unit's MemoryMax of 256 MB however long QuestDB stalls.
      expect(peakRssMb(gw.child.pid!)).toBeLessThan(MAX_PEAK_RSS_MB);

      await waitUntil('the backlog drained', async () => (await status()).queue.readings === 0, 30_000);
      gw.child.kill('SIGTERM');
      await gw.exited;
      expect(await storedCounts(table)).toEqual({ rows: load.accepted, distinct: load.accepted });
    } finally {
      if (gw.child.exitCode === null && gw.child.signalCode === null) {
        gw.child.kill('SIGKILL');
        await gw.exited;
      }
      await proxy.close();
    }
  }, 60_000);
});
