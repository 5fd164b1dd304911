// The gateway on a Raspberry Pi 4–shaped budget: `npm run bench:pi-budget [-- --cpu-share 0.25 --mode power-loss --step 15]`.
// The gateway process runs pinned to CPU 0 in a control group whose CPU quota is `--cpu-share` of
// one core (cgroup v2 `cpu.max`, or cgroup v1 `cpu.cfs_quota_us` where only v1 is mounted), and
// whose memory is limited to `--memory` (v2 `memory.max`, v1 `memory.limit_in_bytes`); peak memory
// and how often the limit was hit are reported. QuestDB and the load generator run unconfined on the other CPUs.
// For single pushes and for batches of 100 it searches the highest rate the gateway keeps up with:
// each step posts at a fixed rate for `--step` seconds (open loop, latency from when a request was
// due); a step keeps up when no request failed, at least 95 % of the rate was answered and the
// queue drained within 10 s after it. The rate doubles while steps keep up, then bisects between
// the best and the first that did not. The figure is the highest rate that kept up with
// p99 ≤ `--p99` ms; the highest that kept up at all and each step's CPU are printed beside it,
// since on a machine shared with other work the latency is the neighbours' as much as the gateway's.
// `--fsync-delay-ms N` makes every fsync of the gateway N ms slower (bench/lib/slow-fsync.mjs), as
// a card's may be; `--loads single` or `batch` runs one of the two searches.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startQuestDb } from '../scripts/lib/questdb.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { sampleProcess } from '../scripts/lib/proc.mjs';
import { percentile } from '../scripts/lib/stats.mjs';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { pin, waitFor } from './lib/harness.mjs';
import { list } from './lib/options.mjs';
import { pacedLoad } from './lib/paced.mjs';
import { slowFsyncEnv } from './lib/slow-fsync.mjs';
import { benchWorkDir, loadAverage } from './lib/standalone.mjs';

const { values: args } = parseArgs({
  options: {
    'cpu-share': { type: 'string', default: '0.25' },
    memory: { type: 'string', default: '256M' },
    mode: { type: 'string', default: 'power-loss' },
    step: { type: 'string', default: '15' },
    p99: { type: 'string', default: '100' },
    'fsync-delay-ms': { type: 'string', default: '0' },
    loads: { type: 'string', default: 'single,batch' },
    bundle: { type: 'string', default: join(projectRoot, 'dist', 'gateway.mjs') },
  },
});
const share = Number(args['cpu-share']);
const stepS = Number(args.step);
const p99LimitMs = Number(args.p99);
const fsyncDelayMs = Number(args['fsync-delay-ms']);
const batches = list(args.loads).map((load) => ({ single: 1, batch: 100 })[load] ?? Number.NaN);
if (batches.some(Number.isNaN)) throw new Error(`--loads takes single and batch, not ${args.loads}`);
const PERIOD_US = 100_000;
const load = loadAverage;

/** `256M`, `1G` or a number of bytes, as cgroup v2 takes it, in bytes for v1. @param {string} size */
function bytesOf(size) {
  const match = /^(\d+)([KMG]?)$/.exec(size);
  if (match === null) throw new Error(`--memory takes bytes with an optional K, M or G, not ${size}`);
  return Number(match[1]) * 1024 ** ' KMG'.indexOf(match[2] || ' ');
}

/**
 * The memory group's figures after a run: its peak and how often the limit was reached (v1), or
 * its peak and the memory.events counts (v2, where the peak file exists).
 * @param {{ dir: string, memoryDir?: string }} group
 */
function memoryFigures(group) {
  if (group.memoryDir !== undefined) {
    return {
      peakMb: Number(readFileSync(join(group.memoryDir, 'memory.max_usage_in_bytes'), 'utf8')) / 2 ** 20,
      limitHits: Number(readFileSync(join(group.memoryDir, 'memory.failcnt'), 'utf8')),
    };
  }
  const peak = join(group.dir, 'memory.peak');
  const events = readFileSync(join(group.dir, 'memory.events'), 'utf8');
  return {
    peakMb: existsSync(peak) ? Number(readFileSync(peak, 'utf8')) / 2 ** 20 : Number.NaN,
    limitHits: Number(/^max (\d+)/m.exec(events)?.[1] ?? 0),
  };
}

/** A control group for the gateway: v2 where its cpu controller is on, else v1's cpu and memory hierarchies. */
function makeCgroup() {
  const name = `harbor-bench-${process.pid}`;
  const v2 = '/sys/fs/cgroup';
  if (existsSync(join(v2, 'cgroup.controllers')) && readFileSync(join(v2, 'cgroup.controllers'), 'utf8').includes('cpu')) {
    const dir = join(v2, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'cpu.max'), `${Math.round(share * PERIOD_US)} ${PERIOD_US}`);
    writeFileSync(join(dir, 'memory.max'), args.memory);
    return { kind: `cgroup v2, cpu.max ${Math.round(share * PERIOD_US)} ${PERIOD_US}, memory.max ${args.memory}`, dir };
  }
  const v1 = '/sys/fs/cgroup/cpu';
  const v1Memory = '/sys/fs/cgroup/memory';
  if (existsSync(join(v1, 'cpu.cfs_quota_us')) && existsSync(join(v1Memory, 'memory.limit_in_bytes'))) {
    const dir = join(v1, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
    writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(Math.round(share * PERIOD_US)));
    const memoryDir = join(v1Memory, name);
    mkdirSync(memoryDir);
    writeFileSync(join(memoryDir, 'memory.limit_in_bytes'), String(bytesOf(args.memory)));
    return {
      kind: `cgroup v1, cpu.cfs_quota_us ${Math.round(share * PERIOD_US)} of ${PERIOD_US}, memory.limit_in_bytes ${args.memory}`,
      dir,
      memoryDir,
    };
  }
  throw new Error('no cgroup v2 cpu controller and no cgroup v1 cpu hierarchy: cannot confine the gateway');
}

const cgroup = makeCgroup();
const workDir = benchWorkDir('pi-');
const apiKey = randomBytes(24).toString('base64url');
pin(process.pid, '1');
const questdb = await startQuestDb({ dataDir: join(workDir, 'questdb') });
pin(/** @type {number} */ (questdb.pid), '1');
process.stdout.write(`${cgroup.kind}; gateway on CPU 0, QuestDB and load on CPU 1; load average ${load()}\n`);

/** @param {number} batch */
async function search(batch) {
  const dataDir = mkdtempSync(join(workDir, 'gateway-'));
  // Each load's own peak (v1; v2 reports the group's since it was made).
  if (cgroup.memoryDir !== undefined) {
    for (const file of ['memory.max_usage_in_bytes', 'memory.failcnt']) writeFileSync(join(cgroup.memoryDir, file), '0');
  }
  const gateway = await startGatewayProcess({
    bundle: args.bundle,
    env: {
      GATEWAY_NAME: 'bench',
      API_KEY: apiKey,
      DATA_DIR: dataDir,
      DURABILITY: args.mode,
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: `pi_${randomBytes(4).toString('hex')}`,
      ...slowFsyncEnv(fsyncDelayMs),
    },
    // Joins the group before it becomes node, so every thread the gateway starts is in it.
    wrap: [
      'sh',
      '-c',
      `${[cgroup.dir, cgroup.memoryDir]
        .filter((dir) => dir !== undefined)
        .map((dir) => `echo $$ > ${join(dir, 'cgroup.procs')}`)
        .join(' && ')} && exec taskset -c 0 "$@"`,
      'sh',
    ],
    timeoutMs: 60_000,
  });
  const queued = async () => {
    const response = await fetch(`${gateway.url}/status`, { headers: { 'X-API-Key': apiKey } });
    return /** @type {{ queue: { readings: number } }} */ (await response.json()).queue.readings;
  };
  /** @type {{ rate: number, readingsPerS: number, p50: number, p99: number, failed: number, drained: boolean, keptUp: boolean, held: boolean, cpuShare: number }[]} */
  const steps = [];
  const step = async (/** @type {number} */ rate) => {
    await pacedLoad({ url: gateway.url, apiKey, rate, seconds: 2, batch });
    const before = sampleProcess(gateway.pid);
    const result = await pacedLoad({ url: gateway.url, apiKey, rate, seconds: stepS, batch });
    const after = sampleProcess(gateway.pid);
    const drained = await waitFor(async () => (await queued()) === 0, 10_000, 250);
    const p99 = percentile(result.latenciesMs, 99) ?? Number.POSITIVE_INFINITY;
    const keptUp = result.failed === 0 && drained && result.readings >= 0.95 * rate * batch * stepS;
    const held = keptUp && p99 <= p99LimitMs;
    const row = {
      rate,
      readingsPerS: result.readings / stepS,
      p50: percentile(result.latenciesMs, 50) ?? 0,
      p99,
      failed: result.failed,
      drained,
      keptUp,
      held,
      cpuShare: (after.cpuSeconds - before.cpuSeconds) / ((after.at - before.at) / 1000),
    };
    steps.push(row);
    process.stdout.write(
      `${batch === 1 ? 'single' : `batch of ${batch}`}: ${rate} requests/s: p50 ${row.p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, ` +
        `${row.failed} failed, ${drained ? 'drained' : 'queue not drained'}, gateway CPU ${(row.cpuShare * 100).toFixed(1)} % of a core: ${held ? 'held' : keptUp ? 'kept up, p99 over' : 'did not keep up'}; load ${load()}\n`,
    );
    if (!drained) await waitFor(async () => (await queued()) === 0, 120_000, 500);
    return keptUp;
  };
  try {
    let best = 0;
    let worst = 0;
    for (let rate = batch === 1 ? 100 : 5; ; rate *= 2) {
      if (await step(rate)) best = rate;
      else {
        worst = rate;
        break;
      }
      if (rate >= 100_000) break;
    }
    for (let i = 0; i < 3 && worst > 0 && worst - best > best * 0.1; i++) {
      const rate = Math.round((best + worst) / 2);
      if (await step(rate)) best = rate;
      else worst = rate;
    }
    const held = steps.filter((s) => s.held).map((s) => s.rate);
    return { batch, best, bestHeld: held.length > 0 ? Math.max(...held) : 0, steps, hwmMb: sampleProcess(gateway.pid).hwmKb / 1024 };
  } finally {
    gateway.child.kill('SIGKILL');
    await gateway.exited;
    const memory = memoryFigures(cgroup);
    process.stdout.write(`memory group after this load: peak ${memory.peakMb.toFixed(1)} MB, limit reached ${memory.limitHits} times\n`);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const results = [];
try {
  for (const batch of batches) results.push(await search(batch));
} finally {
  await questdb.stop();
  rmSync(workDir, { recursive: true, force: true });
  rmdirSync(cgroup.dir);
  if (cgroup.memoryDir !== undefined) rmdirSync(cgroup.memoryDir);
}
process.stdout.write(
  `\n${cgroup.kind}; ${args.mode}; steps of ${stepS} s${fsyncDelayMs > 0 ? `; every fsync ${fsyncDelayMs} ms slower` : ''}; load average at end ${load()}\n\n`,
);
process.stdout.write(
  `| Load | Requests/s at p99 ≤ ${p99LimitMs} ms | Highest requests/s kept up with | Readings/s there | p99 ms there | Gateway CPU there, % of a core | Peak RSS MB |\n|---|---:|---:|---:|---:|---:|---:|\n`,
);
for (const r of results) {
  const at = r.steps.filter((s) => s.keptUp && s.rate === r.best).at(-1);
  process.stdout.write(
    `| ${r.batch === 1 ? 'single push' : `batches of ${r.batch}`} | ${r.bestHeld || 'none'} | ${r.best} | ${Math.round(at?.readingsPerS ?? 0)} | ${at?.p99.toFixed(1) ?? '–'} | ${((at?.cpuShare ?? 0) * 100).toFixed(1)} | ${r.hwmMb.toFixed(1)} |\n`,
  );
}
