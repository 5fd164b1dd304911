// Idle footprint: one reading through the whole path, then the gateway left alone.
import { sampleProcess } from '../../../scripts/lib/proc.mjs';
import { freshGateway, post, sleep, waitFor } from '../harness.mjs';

/**
 * @param {import('../harness.mjs').BenchContext} bench
 * @param {string} mode
 * @param {number} run
 */
export async function idleRun(bench, mode, run) {
  const gw = await freshGateway(bench, mode, 'idle');
  try {
    // One reading through the whole path, so the idle figure includes a set-up table and a flush.
    await post(
      bench,
      gw,
      '/api/v2/ingest/',
      JSON.stringify({ time: new Date().toISOString(), ship_id: 'ship-000', cargo_id: 'temperature', value: 21.5 }),
    );
    const flushed = await waitFor(async () => (await gw.gateway.status()).totals.flushedReadings >= 1, 30_000);
    await sleep(bench.options.idleSettleS * 1000);
    const sample = sampleProcess(gw.gateway.pid);
    // Each thread's V8 heap, used and committed: most of the private memory.
    const { memory } = await gw.gateway.status();
    const heapsKb = {
      ingestUsed: memory.heapUsedBytes / 1024,
      ingestTotal: (memory.heapTotalBytes ?? 0) / 1024,
      deliveryUsed: (memory.deliveryHeapUsedBytes ?? 0) / 1024,
      deliveryTotal: (memory.deliveryHeapTotalBytes ?? 0) / 1024,
    };
    return { mode, run, flushed, rssKb: sample.rssKb, anonKb: sample.anonKb, fileKb: sample.fileKb, hwmKb: sample.hwmKb, heapsKb };
  } finally {
    await gw.dispose();
  }
}
