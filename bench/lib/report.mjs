// Medians over runs, targets beside them, and the Markdown table for docs/benchmarks.md.
import { percentile, summarize } from '../../scripts/lib/stats.mjs';

/** The budgets of a Pi-class board, for the mode that survives a process crash. */
export const TARGETS = {
  singleRequestsPerSec: 30_000,
  singleP99Ms: 10,
  batchReadingsPerSec: 700_000,
  e2eReadingsPerSec: 300_000,
  drainReadingsPerSec: 400_000,
  peakRssMb: 150,
  idleRssMb: 60,
  writeBytesPerJsonByte: 4,
};

/** The mode the targets are set for; the other mode is reported beside it. */
export const TARGET_MODE = 'process-crash';

/** @typedef {ReturnType<typeof summarize>} Summary */

/**
 * @template T
 * @param {readonly T[]} runs
 * @param {(run: T) => number | null | undefined} pick
 */
const over = (runs, pick) => summarize(runs.map(pick));

/** @param {number} kb */
const mb = (kb) => kb / 1024;

/**
 * Medians (with min and max) over the runs of each scenario and mode.
 * @param {any} result  the harness's result object (see run.mjs)
 */
export function summarizeResult(result) {
  const modes = /** @type {string[]} */ (result.options.modes);
  /** @type {any[]} */
  const runs = result.runs.single.concat(result.runs.batch);
  const single = [];
  const batch = [];
  for (const mode of modes) {
    for (const connections of result.options.connections) {
      const these = runs.filter((r) => r.kind === 'single' && r.mode === mode && r.connections === connections);
      if (these.length > 0) single.push({ mode, connections, ...ingestSummary(these) });
    }
    for (const size of result.options.batches) {
      const these = runs.filter((r) => r.kind === 'batch' && r.mode === mode && r.batch === size);
      if (these.length > 0) batch.push({ mode, batch: size, ...ingestSummary(these) });
    }
  }

  // One row per offered rate the confirmation runs tried: the last is the figure when all its runs
  // held; the others show what failed, and how busy the machine was meanwhile.
  const e2e = [];
  for (const entry of result.runs.e2e) {
    /** @type {any[]} */
    const confirmations = entry.confirmations;
    for (const rate of [...new Set(confirmations.map((r) => r.rate))]) {
      const runs = confirmations.filter((r) => r.rate === rate);
      const sustained = runs.filter((r) => r.sustained);
      const failed = runs.filter((r) => !r.sustained);
      const delays = sustained.flatMap((r) => r.probe?.delaysMs ?? []);
      e2e.push({
        mode: entry.mode,
        rate,
        searchedRate: entry.search.good,
        firstFailedRate: Number.isFinite(entry.search.bad) ? entry.search.bad : null,
        sustainedRuns: sustained.length,
        runs: runs.length,
        allSustained: runs.length > 0 && failed.length === 0,
        deliveredReadingsPerSec: over(sustained, (r) => r.flushedReadingsPerSec),
        acceptedReadingsPerSec: over(sustained, (r) => r.acceptedReadingsPerSec),
        probeP50Ms: over(sustained, (r) => r.probe?.p50Ms),
        probeP99Ms: over(sustained, (r) => r.probe?.p99Ms),
        probes: delays.length,
        probesLost: runs.reduce((n, r) => n + (r.probe?.lost ?? 0), 0),
        pooledProbeP50Ms: percentile(delays, 50) ?? null,
        pooledProbeP99Ms: percentile(delays, 99) ?? null,
        maxQueueDepth: over(sustained, (r) => r.queue.maxDepth),
        verifiedRuns: runs.filter((r) => r.verified === true).length,
        othersWhenHeld: over(sustained, (r) => r.othersOnGatewayCpus),
        othersWhenFailed: failed.length === 0 ? null : Math.max(...failed.map((r) => r.othersOnGatewayCpus ?? 0)),
        ...footprintOf(sustained.length > 0 ? sustained : runs),
        jsonBytesPerReading: runs[0]?.jsonBytesPerReading ?? null,
      });
    }
  }

  const drain = [];
  for (const mode of modes) {
    /** @type {any[]} */
    const these = result.runs.drain.filter((/** @type {any} */ r) => r.mode === mode);
    if (these.length === 0) continue;
    drain.push({
      mode,
      readings: these[0].readings,
      flushedReadingsPerSec: over(these, (r) => r.flushedReadingsPerSec),
      queryableReadingsPerSec: over(these, (r) => r.queryableReadingsPerSec),
      verifiedRuns: these.filter((r) => r.verified).length,
      runs: these.length,
      ...footprintOf(these),
    });
  }

  const footprint = [];
  for (const mode of modes) {
    /** @type {any[]} */
    const idle = result.runs.idle.filter((/** @type {any} */ r) => r.mode === mode);
    /** @type {{ scenario: string, hwmMb: Summary }[]} */
    const peaks = [
      ...single.filter((s) => s.mode === mode).map((s) => ({ scenario: `single push, ${s.connections} connections`, hwmMb: s.hwmMb })),
      ...batch.filter((s) => s.mode === mode).map((s) => ({ scenario: `batch of ${s.batch}`, hwmMb: s.hwmMb })),
      ...e2e.filter((s) => s.mode === mode).map((s) => ({ scenario: `end to end at ${fmt(s.rate)}/s`, hwmMb: s.hwmMb })),
      ...drain.filter((s) => s.mode === mode).map((s) => ({ scenario: 'drain', hwmMb: s.hwmMb })),
    ].filter((p) => p.hwmMb.median !== null);
    const peak = peaks.reduce(
      (/** @type {typeof peaks[number] | undefined} */ best, p) =>
        best === undefined || /** @type {number} */ (p.hwmMb.median) > /** @type {number} */ (best.hwmMb.median) ? p : best,
      undefined,
    );
    if (idle.length === 0 && peak === undefined) continue;
    footprint.push({
      mode,
      idleRssMb: over(idle, (r) => mb(r.rssKb)),
      idleAnonMb: over(idle, (r) => mb(r.anonKb)),
      idleFileMb: over(idle, (r) => mb(r.fileKb)),
      peakRssMb: peak?.hwmMb ?? summarize([]),
      peakScenario: peak?.scenario ?? null,
    });
  }
  return { single, batch, e2e, drain, footprint };
}

/** @param {any[]} runs */
function ingestSummary(runs) {
  return {
    requestsPerSec: over(runs, (r) => r.requestsPerSec),
    readingsPerSec: over(runs, (r) => r.readingsPerSec),
    p50Ms: over(runs, (r) => r.latencyMs.p50),
    p99Ms: over(runs, (r) => r.latencyMs.p99),
    non2xx: runs.reduce((n, r) => n + r.errors.status, 0),
    socketErrors: runs.reduce((n, r) => n + r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout, 0),
    wrkCpuShare: over(runs, (r) => r.wrkCpuShare),
    loadCpuBusy: over(runs, (r) => r.loadCpuBusy),
    jsonBytesPerReading: runs[0].jsonBytesPerReading,
    verifiedRuns: runs.filter((r) => r.verified?.ok === true).length,
    checkedRuns: runs.filter((r) => r.verified !== null && r.verified !== undefined).length,
    runs: runs.length,
    ...footprintOf(runs),
  };
}

/** @param {any[]} runs */
function footprintOf(runs) {
  return {
    cpuSecondsPerMillion: over(runs, (r) => r.footprint.cpuSecondsPerMillion),
    writeBytesPerReading: over(runs, (r) => r.footprint.writeBytesPerReading),
    gatewayCpuShare: over(runs, (r) => r.footprint.gatewayCpuShare),
    othersOnGatewayCpus: over(runs, (r) => r.othersOnGatewayCpus),
    hwmMb: over(runs, (r) => mb(r.footprint.hwmKb)),
  };
}

/**
 * @param {number | null | undefined} value
 * @param {number} [digits]
 */
export function fmt(value, digits = 0) {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/**
 * "median (min–max)" when there was more than one run.
 * @param {Summary} s
 * @param {number} [digits]
 */
export function cell(s, digits = 0) {
  if (s.median === null) return '–';
  if (s.n < 2) return fmt(s.median, digits);
  return `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;
}

/**
 * The target and whether the median meets it.
 * @param {number | null} value
 * @param {'>=' | '<='} op
 * @param {number} target
 * @param {string} [unit]
 */
function verdict(value, op, target, unit = '') {
  const goal = `${op === '>=' ? '≥' : '≤'} ${fmt(target, target < 100 ? (Number.isInteger(target) ? 0 : 1) : 0)}${unit}`;
  if (value === null) return `${goal}: no figure`;
  const met = op === '>=' ? value >= target : value <= target;
  return `${goal}: ${met ? 'met' : '**missed**'}`;
}

/** @param {number | null} share */
const pct = (share) => (share === null ? '–' : `${fmt(share * 100)} %`);

const CPU_HEADER = 'Gateway CPU | wrk CPU | Load CPUs busy | Others on gateway CPU';
const CPU_ALIGN = '---:|---:|---:|---:';
/**
 * Where the CPU time went: the gateway's share of a core, wrk's, how busy the generator's CPUs
 * were, and how much other processes took from the gateway's CPUs (0 on a quiet machine).
 * @param {{ gatewayCpuShare: Summary, wrkCpuShare: Summary, loadCpuBusy: Summary, othersOnGatewayCpus: Summary }} s
 */
const cpuCells = (s) => [s.gatewayCpuShare, s.wrkCpuShare, s.loadCpuBusy, s.othersOnGatewayCpus].map((x) => pct(x.median)).join(' | ');

/**
 * The Markdown report: machine, then one table per scenario.
 * @param {any} result
 * @param {ReturnType<typeof summarizeResult>} summary
 */
export function renderMarkdown(result, summary) {
  const m = result.machine;
  const o = result.options;
  const lines = [];
  lines.push(
    `### ${o.quick ? 'Quick run' : 'Run'} of ${result.startedAt.slice(0, 10)}, commit ${m.gitCommit.slice(0, 12)}${m.gitDirty ? ' (with uncommitted changes)' : ''}`,
  );
  lines.push('');
  if (result.failure) lines.push(`**Partial results: the run stopped with an error** (${String(result.failure).split('\n')[0]}).`, '');
  lines.push(
    `Command: \`${result.command}\` (${fmt(result.durationSeconds / 60, 1)} min). ${o.runs} run${o.runs === 1 ? '' : 's'} per figure; cells are median (min–max).`,
  );
  lines.push('');
  lines.push('| Machine | |');
  lines.push('|---|---|');
  lines.push(`| CPU | ${m.cpuModel}, ${m.cores} cores${m.cpuMhz ? ` at ${fmt(m.cpuMhz)} MHz` : ''} |`);
  lines.push(`| RAM | ${m.ramGiB} GiB |`);
  lines.push(`| Kernel | ${m.kernel} (${m.arch}); data on ${m.dataFilesystem} |`);
  lines.push(`| Node / Java | ${m.node} / ${m.java} |`);
  lines.push(`| QuestDB / wrk | ${m.questdb} / ${m.wrk} |`);
  lines.push(`| Load average at start | ${m.loadAverageAtStart.join(', ')} |`);
  lines.push(
    `| CPUs | ${m.pinning ? `gateway on ${m.pinning.gateway}; wrk and harness on ${m.pinning.load}; QuestDB on ${m.pinning.questdb}` : 'not pinned: gateway, wrk and QuestDB share all CPUs'} |`,
  );
  const others = [...summary.single, ...summary.batch, ...summary.e2e, ...summary.drain]
    .map((s) => s.othersOnGatewayCpus.median)
    .filter((x) => x !== null);
  const worst = Math.max(0, ...others);
  if (worst > 0.1) {
    lines.push('');
    lines.push(
      `**The machine was busy:** other processes took up to ${pct(worst)} of the gateway's CPU (median of a scenario's runs), so these figures understate the gateway. Measure on a quiet machine before comparing.`,
    );
  }
  lines.push('');
  lines.push(`Targets apply to \`${TARGET_MODE}\`; \`power-loss\` rows are compared with them for reference.`);

  if (summary.single.length > 0) {
    lines.push('', '#### Single push (`POST /api/v2/ingest/`, one reading per request)', '');
    lines.push(`| Mode | Connections | Requests/s | p50 ms | p99 ms | Target | Rows verified | ${CPU_HEADER} |`);
    lines.push(`|---|---:|---:|---:|---:|---|---:|${CPU_ALIGN}|`);
    for (const s of summary.single) {
      const target =
        s.connections === 64
          ? `${verdict(s.requestsPerSec.median, '>=', TARGETS.singleRequestsPerSec, ' req/s')}; ${verdict(s.p99Ms.median, '<=', TARGETS.singleP99Ms, ' ms p99')}`
          : '';
      lines.push(
        `| ${s.mode} | ${s.connections} | ${cell(s.requestsPerSec)} | ${cell(s.p50Ms, 2)} | ${cell(s.p99Ms, 2)} | ${target} | ${s.verifiedRuns}/${s.checkedRuns} | ${cpuCells(s)} |`,
      );
    }
    noteErrors(lines, summary.single);
  }

  if (summary.batch.length > 0) {
    lines.push('', `#### Batch push (\`POST /api/v2/ingest/batch\`, ${o.batchConnections} connections)`, '');
    lines.push(`| Mode | Readings per batch | Readings/s | Requests/s | p50 ms | p99 ms | Target | ${CPU_HEADER} |`);
    lines.push(`|---|---:|---:|---:|---:|---:|---|${CPU_ALIGN}|`);
    for (const s of summary.batch) {
      lines.push(
        `| ${s.mode} | ${fmt(s.batch)} | ${cell(s.readingsPerSec)} | ${cell(s.requestsPerSec)} | ${cell(s.p50Ms, 2)} | ${cell(s.p99Ms, 2)} | ${verdict(s.readingsPerSec.median, '>=', TARGETS.batchReadingsPerSec)} | ${cpuCells(s)} |`,
      );
    }
    noteErrors(lines, summary.batch);
  }

  if (summary.e2e.length > 0) {
    lines.push('', `#### End to end (batches of 1,000 at a paced rate, ${o.e2eDurationS} s per run, queue bounded)`, '');
    lines.push(
      'Each offered rate the confirmation runs tried; the figure is the last rate, when all its runs held. Medians are over the runs that held.',
      '',
    );
    lines.push(
      '| Mode | Offered readings/s | Runs sustained | Into QuestDB readings/s | 2xx → queryable p50 ms | p99 ms | Max queue depth | Rows verified | Target | Gateway CPU | Others on gateway CPU (held / worst failed) |',
    );
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|');
    for (const s of summary.e2e) {
      lines.push(
        `| ${s.mode} | ${fmt(s.rate)} | ${s.sustainedRuns}/${s.runs} | ${cell(s.deliveredReadingsPerSec)} | ${cell(s.probeP50Ms)} | ${cell(s.probeP99Ms)} | ${cell(s.maxQueueDepth)} | ${s.verifiedRuns}/${s.runs} | ${s.allSustained ? verdict(s.deliveredReadingsPerSec.median, '>=', TARGETS.e2eReadingsPerSec) : 'not all runs held'} | ${pct(s.gatewayCpuShare.median)} | ${pct(s.othersWhenHeld.median)} / ${pct(s.othersWhenFailed)} |`,
      );
    }
    /** @type {Map<string, any>} */
    const searched = new Map(summary.e2e.map((s) => [s.mode, s]));
    const searches = [...searched.values()].map(
      (s) =>
        `${s.mode}: highest sustained step ${fmt(s.searchedRate)}/s, first failed step ${s.firstFailedRate === null ? 'none' : `${fmt(s.firstFailedRate)}/s`}`,
    );
    const probes = summary.e2e.reduce((n, s) => n + s.probes, 0);
    const lost = summary.e2e.reduce((n, s) => n + s.probesLost, 0);
    lines.push('', `Rate search (${o.e2eStepS} s steps): ${searches.join('; ')}. Probes measured: ${probes} (lost ${lost}).`);
  }

  if (summary.drain.length > 0) {
    lines.push('', `#### Drain (backlog queued while QuestDB was unreachable, then flushed)`, '');
    lines.push(
      '| Mode | Backlog | Flushed readings/s | Queryable readings/s | Rows verified | Target | Gateway CPU | Others on gateway CPU |',
    );
    lines.push('|---|---:|---:|---:|---:|---|---:|---:|');
    for (const s of summary.drain) {
      lines.push(
        `| ${s.mode} | ${fmt(s.readings)} | ${cell(s.flushedReadingsPerSec)} | ${cell(s.queryableReadingsPerSec)} | ${s.verifiedRuns}/${s.runs} | ${verdict(s.flushedReadingsPerSec.median, '>=', TARGETS.drainReadingsPerSec)} | ${pct(s.gatewayCpuShare.median)} | ${pct(s.othersOnGatewayCpus.median)} |`,
      );
    }
  }

  if (summary.footprint.length > 0 || summary.single.length > 0) {
    lines.push('', '#### Footprint (gateway process)', '');
    lines.push('| Mode | Idle RSS MB | of it private (RssAnon) | of it mapped files (RssFile) | Peak RSS MB (VmHWM) | Target |');
    lines.push('|---|---:|---:|---:|---:|---|');
    for (const f of summary.footprint) {
      lines.push(
        `| ${f.mode} | ${cell(f.idleRssMb, 1)} | ${cell(f.idleAnonMb, 1)} | ${cell(f.idleFileMb, 1)} | ${cell(f.peakRssMb, 1)}${f.peakScenario ? ` in ${f.peakScenario}` : ''} | ${verdict(f.idleRssMb.median, '<=', TARGETS.idleRssMb, ' MB idle')}; ${verdict(f.peakRssMb.median, '<=', TARGETS.peakRssMb, ' MB peak')} |`,
      );
    }
    lines.push('');
    lines.push(
      '| Mode | Scenario | CPU s per million readings | Bytes written per reading | JSON bytes per reading | Target (written ≤ 4 × JSON) |',
    );
    lines.push('|---|---|---:|---:|---:|---|');
    /** @type {{ mode: string, label: string, s: any, json: number | null }[]} */
    const rows = [];
    for (const s of summary.single)
      if (s.connections === Math.max(...o.connections))
        rows.push({ mode: s.mode, label: `single push, ${s.connections} connections`, s, json: s.jsonBytesPerReading });
    for (const s of summary.batch) rows.push({ mode: s.mode, label: `batch of ${s.batch}`, s, json: s.jsonBytesPerReading });
    for (const s of summary.e2e)
      rows.push({ mode: s.mode, label: `end to end at ${fmt(s.rate)}/s (queued, flushed, deleted)`, s, json: s.jsonBytesPerReading });
    for (const s of summary.drain) rows.push({ mode: s.mode, label: 'drain (flushed, deleted)', s, json: null });
    rows.sort((a, b) => (a.mode === b.mode ? 0 : a.mode === TARGET_MODE ? -1 : 1));
    for (const { mode, label, s, json } of rows) {
      const bytes = s.writeBytesPerReading.median;
      const target =
        json === null || bytes === null
          ? ''
          : `${fmt(bytes / json, 2)} ×: ${bytes <= TARGETS.writeBytesPerJsonByte * json ? 'met' : '**missed**'}`;
      lines.push(
        `| ${mode} | ${label} | ${cell(s.cpuSecondsPerMillion, 2)} | ${cell(s.writeBytesPerReading, 1)} | ${json === null ? '–' : fmt(json, 1)} | ${target} |`,
      );
    }
  }
  if (result.failedRuns?.length > 0) {
    lines.push(
      '',
      `Failed runs (no figure): ${result.failedRuns.map((/** @type {{ label: string, error: string }} */ f) => `${f.label}: ${f.error.split('\n')[0]}`).join('; ')}.`,
    );
  }
  lines.push('');
  return lines.join('\n');
}

/**
 * @param {string[]} lines
 * @param {{ mode: string, non2xx: number, socketErrors: number }[]} rows
 */
function noteErrors(lines, rows) {
  const bad = rows.filter((r) => r.non2xx > 0 || r.socketErrors > 0);
  if (bad.length === 0) return;
  lines.push(
    '',
    `Errors: ${bad.map((r) => `${r.mode}: ${r.non2xx} non-2xx answers, ${r.socketErrors} socket errors or timeouts`).join('; ')}.`,
  );
}
