// End to end: a fixed offered rate of batches, the queue's depth watched and probe readings timed
// from their answer to their row in QuestDB; a search for the highest rate the gateway sustains.
import { sql } from '../../../scripts/lib/questdb-sql.mjs';
import { msPrefix } from '../../../scripts/lib/readings.mjs';
import { percentile, queueBounded } from '../../../scripts/lib/stats.mjs';
import { runWrk } from '../wrk.mjs';
import { allRowsArrived, batchFile, fmtRate, footprint, freshGateway, post, sleep, snapshot, waitFor } from '../harness.mjs';

/**
 * Posts a probe reading every `probeIntervalMs` and polls QuestDB for the newest probe row; the
 * delay of a probe is from its 2xx answer to the first poll answer that shows it (so at most one
 * poll late). The flusher ships the queue in order and QuestDB makes its commits visible in order,
 * so once probe n is visible every probe before it is too: asking for the latest probe only (a
 * constant, cheap query) sees each probe as soon as a query for it would.
 * @param {import('../harness.mjs').BenchContext} bench
 * @param {{ gateway: import('../gateway.mjs').BenchGateway, table: string }} gw
 */
function startProber(bench, gw) {
  const { options } = bench;
  /** @type {Map<number, number>} probe id -> when its 2xx answer arrived */
  const pending = new Map();
  /** @type {number[]} */
  const delaysMs = [];
  let sent = 0;
  let failed = 0;
  let inFlight = 0;
  let polling = true;
  const posting = setInterval(() => {
    const id = ++sent;
    const time = `${msPrefix(Date.now())}${String(id % 1_000_000).padStart(6, '0')}Z`;
    inFlight += 1;
    post(bench, gw, '/api/v2/ingest/', JSON.stringify({ time, ship_id: 'bench-probe', cargo_id: 'latency', value: id }))
      .then(
        () => pending.set(id, performance.now()),
        () => (failed += 1),
      )
      .finally(() => (inFlight -= 1));
  }, options.probeIntervalMs);
  const query = `SELECT value FROM '${gw.table}' WHERE ship_id = 'bench-probe' LATEST ON time PARTITION BY ship_id`;
  const poller = (async () => {
    while (polling) {
      if (pending.size > 0) {
        try {
          const latest = Number((await sql(bench.questdb.httpUrl, query)).dataset[0]?.[0] ?? 0);
          const at = performance.now();
          for (const [id, ackAt] of pending) {
            if (id > latest) continue;
            delaysMs.push(at - ackAt);
            pending.delete(id);
          }
        } catch {
          // The table does not exist before the first flush.
        }
      }
      await sleep(options.probePollMs);
    }
  })();
  return {
    /** Stops posting, waits up to `timeoutMs` for the probes still on their way, and reports. */
    async finish(/** @type {number} */ timeoutMs) {
      clearInterval(posting);
      await waitFor(async () => inFlight === 0 && pending.size === 0, timeoutMs, 50);
      polling = false;
      await poller;
      return {
        sent,
        failed,
        found: delaysMs.length,
        lost: pending.size,
        p50Ms: percentile(delaysMs, 50) ?? null,
        p99Ms: percentile(delaysMs, 99) ?? null,
        maxMs: delaysMs.length === 0 ? null : Math.max(...delaysMs),
        delaysMs: delaysMs.map((d) => Math.round(d * 10) / 10),
      };
    },
  };
}

/**
 * Offers `rate` readings/s in batches for `windowS` seconds (after a warm-up) and checks that the
 * gateway takes them all and its queue stays bounded.
 * @param {import('../harness.mjs').BenchContext} bench
 * @param {string} mode
 * @param {number} rate
 * @param {number} windowS
 * @param {{ probe: boolean, verify: boolean }} what
 */
async function e2eRun(bench, mode, rate, windowS, what) {
  const { options } = bench;
  const gw = await freshGateway(bench, mode, 'e2e');
  try {
    const file = batchFile(bench, options.e2eBatch);
    const wrkDone = runWrk({
      url: `${gw.gateway.url}/api/v2/ingest/batch`,
      threads: options.wrkThreads,
      connections: options.e2eConnections,
      durationS: options.e2eWarmupS + windowS + 2,
      cpus: options.pinning?.load,
      env: { BENCH_KIND: 'batch', BENCH_FILE: file.path, BENCH_API_KEY: bench.apiKey, BENCH_RATE: String(rate / options.e2eBatch) },
    });
    // Awaited below; until then a failure elsewhere must not leave its rejection unhandled.
    wrkDone.catch(() => undefined);
    await sleep(options.e2eWarmupS * 1000);
    const status0 = await gw.gateway.status();
    const before = snapshot(bench, gw.gateway.pid);
    const prober = what.probe ? startProber(bench, gw) : undefined;
    /** @type {{ t: number, depth: number }[]} */
    const samples = [];
    const t0 = performance.now();
    while (performance.now() - t0 < windowS * 1000) {
      const status = await gw.gateway.status();
      samples.push({ t: (performance.now() - t0) / 1000, depth: status.queue.readings });
      await sleep(250);
    }
    const after = snapshot(bench, gw.gateway.pid);
    const status1 = await gw.gateway.status();
    const seconds = (after.gateway.at - before.gateway.at) / 1000;
    const wrk = await wrkDone;
    const acceptedReadings = status1.totals.acceptedReadings - status0.totals.acceptedReadings;
    const flushedReadings = status1.totals.flushedReadings - status0.totals.flushedReadings;
    const acceptedRate = acceptedReadings / seconds;
    const flushedRate = flushedReadings / seconds;
    const queue = queueBounded(samples, rate);
    const errors = wrk.errors.connect + wrk.errors.read + wrk.errors.write + wrk.errors.timeout + wrk.errors.status;
    const reasons = [];
    if (errors > 0) reasons.push(`${errors} failed requests`);
    if (acceptedRate < 0.95 * rate)
      reasons.push(`accepted ${Math.round(acceptedRate)}/s of ${rate}/s offered (wrk sent ${wrk.requests} requests)`);
    if (!queue.bounded)
      reasons.push(
        `queue grew ${Math.round(queue.growthPerSecond)}/s (allowed ${Math.round(queue.allowedGrowthPerSecond)}/s) to ${queue.lastDepth}`,
      );
    const probe = prober ? await prober.finish(30_000) : undefined;
    /** @type {boolean | null} */
    let verified = null;
    let rows = null;
    if (what.verify) {
      // Every accepted reading (load and probes) must be in QuestDB exactly once.
      const check = await allRowsArrived(bench, gw);
      verified = check.ok;
      rows = check.rows;
      if (!verified) reasons.push(`QuestDB has ${rows} rows, ${check.accepted} readings were accepted`);
    }
    return {
      mode,
      rate,
      windowS,
      seconds,
      sustained: reasons.length === 0,
      reasons,
      acceptedReadingsPerSec: acceptedRate,
      flushedReadingsPerSec: flushedRate,
      queue: { ...queue, samples: samples.map((s) => [Math.round(s.t * 100) / 100, s.depth]) },
      wrk: { requests: wrk.requests, errors: wrk.errors, latencyMs: { p50: wrk.latencyUs.p50 / 1000, p99: wrk.latencyUs.p99 / 1000 } },
      wrkCpuShare: wrk.cpuSeconds === undefined ? null : wrk.cpuSeconds / (wrk.durationUs / 1e6),
      probe,
      verified,
      rows,
      jsonBytesPerReading: file.jsonBytesPerReading,
      ...footprint(bench, before, after, acceptedReadings),
    };
  } finally {
    await gw.dispose();
  }
}

/**
 * Finds the highest offered rate the gateway sustains (short steps: doubling, then bisection),
 * then confirms it with full-length runs, stepping down 10 % when a run fails.
 * @param {import('../harness.mjs').BenchContext} bench
 * @param {string} mode
 */
export async function e2eScenario(bench, mode) {
  const { options, attempt, say } = bench;
  /** @param {number} r */
  const round = (r) => Math.max(options.e2eBatch, Math.round(r / options.e2eBatch) * options.e2eBatch);
  const steps = [];
  let rate = round(options.e2eStartRate);
  let good = 0;
  let bad = Infinity;
  for (let i = 0; i < options.e2eMaxSteps; i++) {
    const step = await attempt(`e2e ${mode} step ${fmtRate(rate)}`, () =>
      e2eRun(bench, mode, rate, options.e2eStepS, { probe: false, verify: false }),
    );
    if (step) {
      steps.push(step);
      say(`e2e ${mode} step ${fmtRate(rate)}: ${step.sustained ? 'sustained' : `not sustained (${step.reasons.join('; ')})`}`);
    }
    if (step?.sustained) good = Math.max(good, rate);
    else bad = Math.min(bad, rate);
    if (good > 0 && bad / good <= 1.1) break;
    const next = round(bad === Infinity ? rate * 2 : good === 0 ? rate / 2 : (good + bad) / 2);
    if (next === rate) break;
    rate = next;
  }
  const confirmations = [];
  let confirmedRate = good;
  for (let reductions = 0; confirmedRate > 0 && reductions <= 2; reductions++) {
    let failed = false;
    for (let run = 1; run <= options.runs; run++) {
      const r = await attempt(`e2e ${mode} run ${run} at ${fmtRate(confirmedRate)}`, () =>
        e2eRun(bench, mode, confirmedRate, options.e2eDurationS, { probe: true, verify: true }),
      );
      if (!r) {
        failed = true;
        break;
      }
      confirmations.push(r);
      say(
        `e2e ${mode} run ${run} at ${fmtRate(confirmedRate)}: ${r.sustained ? 'sustained' : `not sustained (${r.reasons.join('; ')})`}, ` +
          `into QuestDB ${fmtRate(r.flushedReadingsPerSec)}, probe p50 ${r.probe?.p50Ms?.toFixed(0)} ms p99 ${r.probe?.p99Ms?.toFixed(0)} ms`,
      );
      if (!r.sustained) {
        failed = true;
        break;
      }
    }
    if (!failed) break;
    if (reductions < 2) confirmedRate = round(confirmedRate * 0.9);
  }
  return { mode, search: { good, bad, steps }, confirmedRate, confirmations };
}
