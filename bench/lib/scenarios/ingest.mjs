// Single and batch push: wrk at a fixed number of connections, as fast as the gateway answers.
import { runWrk } from '../wrk.mjs';
import { allRowsArrived, batchFile, footprint, freshGateway, snapshot } from '../harness.mjs';

/**
 * @param {import('../harness.mjs').BenchContext} bench
 * @param {string} mode
 * @param {'single' | 'batch'} kind
 * @param {number} size
 * @param {number} connections
 * @param {number} run
 */
export async function ingestRun(bench, mode, kind, size, connections, run) {
  const { options } = bench;
  // Batch runs outpace the flusher and queue millions of readings: a larger bound than the shipped
  // 1 GiB keeps a fast gateway from answering 503 before the run ends.
  const gw = await freshGateway(
    bench,
    mode,
    kind === 'single' ? `single_c${connections}` : `batch${size}`,
    kind === 'batch' ? { QUEUE_MAX_BYTES: '8GiB' } : {},
  );
  try {
    const file = kind === 'single' ? bench.loadFiles.single : batchFile(bench, size);
    const load = {
      url: `${gw.gateway.url}${kind === 'single' ? '/api/v2/ingest/' : '/api/v2/ingest/batch'}`,
      threads: Math.min(connections, options.wrkThreads),
      connections,
      cpus: options.pinning?.load,
      env: { BENCH_KIND: kind, BENCH_FILE: file.path, BENCH_API_KEY: bench.apiKey },
    };
    await runWrk({ ...load, durationS: options.warmupS });
    const status0 = await gw.gateway.status();
    const before = snapshot(bench, gw.gateway.pid);
    const wrk = await runWrk({ ...load, durationS: options.durationS });
    const after = snapshot(bench, gw.gateway.pid);
    const status1 = await gw.gateway.status();
    const seconds = wrk.durationUs / 1e6;
    const accepted = wrk.requests - wrk.errors.status;
    const gatewayAccepted = status1.totals.acceptedReadings - status0.totals.acceptedReadings;
    // Single pushes leave a short queue: check that every accepted reading became its own row.
    // (Batch runs leave millions queued; the end-to-end and drain runs check the batch readings.)
    const verified = kind === 'single' ? await allRowsArrived(bench, gw) : null;
    return {
      mode,
      kind,
      batch: size,
      connections,
      run,
      seconds,
      requests: wrk.requests,
      requestsPerSec: accepted / seconds,
      readingsPerSec: (accepted * size) / seconds,
      // A run in which no request completed has no latency; its rate (0) stands.
      latencyMs:
        accepted === 0
          ? { p50: null, p90: null, p99: null, max: null }
          : { p50: wrk.latencyUs.p50 / 1000, p90: wrk.latencyUs.p90 / 1000, p99: wrk.latencyUs.p99 / 1000, max: wrk.latencyUs.max / 1000 },
      errors: wrk.errors,
      gatewayAcceptedReadings: gatewayAccepted,
      queueAtEnd: status1.queue.readings,
      jsonBytesPerReading: file.jsonBytesPerReading,
      verified,
      wrkCpuShare: wrk.cpuSeconds === undefined ? null : wrk.cpuSeconds / seconds,
      ...footprint(bench, before, after, accepted === 0 ? 0 : gatewayAccepted),
    };
  } finally {
    await gw.dispose();
  }
}
