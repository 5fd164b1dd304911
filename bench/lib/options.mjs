// The harness's command line: `npm run bench -- --help`.
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { projectRoot } from '../../scripts/lib/paths.mjs';

export const HELP = `Usage: npm run bench [-- options]

Scenarios (default all): idle, single, batch, e2e, drain (footprint figures come from all of them).

  --quick                 smoke test: 1 run, short durations, 100,000-reading drain
  --runs N                runs per figure (default 5; quick 1)
  --duration S            measured seconds of each single and batch run (default 10; quick 3)
  --warmup S              warm-up seconds before each of them (default 2; quick 1)
  --e2e-duration S        seconds of each end-to-end confirmation run (default 60; quick 8)
  --e2e-step S            seconds of each step of the end-to-end rate search (default 15; quick 4)
  --e2e-start N           first offered rate of the search, readings/s (default 100000; quick 50000)
  --e2e-steps N           most steps of the search (default 7; quick 4)
  --drain-readings N      backlog of the drain scenario (default 1000000; quick 100000)
  --modes LIST            durability modes (default process-crash,power-loss)
  --scenarios LIST        subset of idle,single,batch,e2e,drain
  --connections LIST      single-push connection counts (default 1,16,64)
  --batches LIST          readings a request of the batch scenario (default 100,1000)
  --gateway-env LIST      settings given to every gateway run, KEY=VALUE,… (for example CONSOLE=off)
  --batch-connections N   connections of the batch scenario (default 16)
  --wrk-threads N         wrk threads (default 2)
  --gateway-cpus LIST     CPUs of the gateway (default 0)
  --load-cpus LIST        CPUs of wrk and this harness (default 1)
  --questdb-cpus LIST     CPUs of QuestDB (default 1 on two cores, 2-N on more)
  --no-pin                do not pin processes to CPUs
  --work-dir DIR          where fresh data directories are made (default bench/.work; not tmpfs)
  --out DIR               where results are written (default bench/results)
  --keep                  keep the data directories afterwards

Comparing two builds:

  --compare [REF]         also build REF (a release such as 0.4.0, or any commit; default the newest
                          release CHANGELOG.md records) and run it and this build alternately, run by
                          run, then print each figure of both with this build's ratio to REF's.
                          Scenarios default to idle,single,batch (e2e is a search per build: refused)
`;

const ALL_SCENARIOS = ['idle', 'single', 'batch', 'e2e', 'drain'];
const COMPARE_SCENARIOS = ['idle', 'single', 'batch'];

/**
 * @param {string | undefined} value
 * @param {number} fallback
 * @param {string} name
 */
const num = (value, fallback, name) => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got ${value}`);
  return n;
};

/** @param {string} value */
export const list = (value) =>
  value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

/**
 * `--gateway-env` as settings: KEY=VALUE pairs separated by commas.
 * @param {string} value
 * @returns {Record<string, string>}
 */
const gatewayEnvOf = (value) =>
  Object.fromEntries(
    list(value).map((pair) => {
      const at = pair.indexOf('=');
      if (at <= 0 || !/^[A-Z][A-Z0-9_]*$/.test(pair.slice(0, at))) throw new Error(`--gateway-env takes KEY=VALUE pairs, got ${pair}`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );

/**
 * `--compare` takes an optional value: bare, or followed by another option, it means the previous
 * release. parseArgs has no optional values, so the bare form is rewritten before parsing.
 * @param {string[]} argv
 */
function withCompareValue(argv) {
  return argv.flatMap((arg, i) => {
    if (arg !== '--compare') return [arg];
    const next = argv[i + 1];
    return next === undefined || next.startsWith('--') ? ['--compare=previous'] : [arg];
  });
}

/**
 * A single-push bench's options: `--runs N`, `--duration S`, `--connections N`, and its own (`extra`).
 * @param {number} defaultRuns
 * @param {import('node:util').ParseArgsConfig['options']} [own]
 */
export function parseLoadArgs(defaultRuns, own = {}) {
  const { values: args } = parseArgs({
    options: {
      runs: { type: 'string', default: String(defaultRuns) },
      duration: { type: 'string', default: '10' },
      connections: { type: 'string', default: '64' },
      ...own,
    },
  });
  return {
    runs: Number(args.runs),
    durationS: Number(args.duration),
    connections: Number(args.connections),
    extra: /** @type {Record<string, unknown>} */ (args),
  };
}

/**
 * Parses the command line into the harness's options.
 * @param {string[]} argv
 */
export function parseBenchArgs(argv) {
  const { values: args } = parseArgs({
    args: withCompareValue(argv),
    options: {
      quick: { type: 'boolean', default: false },
      runs: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      'e2e-duration': { type: 'string' },
      'e2e-step': { type: 'string' },
      'e2e-start': { type: 'string' },
      'e2e-steps': { type: 'string' },
      'drain-readings': { type: 'string' },
      modes: { type: 'string' },
      scenarios: { type: 'string' },
      connections: { type: 'string' },
      batches: { type: 'string' },
      'gateway-env': { type: 'string' },
      'batch-connections': { type: 'string' },
      'wrk-threads': { type: 'string' },
      'gateway-cpus': { type: 'string' },
      'load-cpus': { type: 'string' },
      'questdb-cpus': { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
      'work-dir': { type: 'string' },
      out: { type: 'string' },
      keep: { type: 'boolean', default: false },
      compare: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (args.help) return { help: true, keep: false, options: undefined };

  const quick = args.quick;
  const cores = os.availableParallelism();
  const compare = args.compare;
  const options = {
    quick,
    runs: num(args.runs, quick ? 1 : 5, 'runs'),
    durationS: num(args.duration, quick ? 3 : 10, 'duration'),
    warmupS: num(args.warmup, quick ? 1 : 2, 'warmup'),
    e2eWarmupS: quick ? 2 : 5,
    e2eDurationS: num(args['e2e-duration'], quick ? 8 : 60, 'e2e-duration'),
    e2eStepS: num(args['e2e-step'], quick ? 4 : 15, 'e2e-step'),
    e2eStartRate: num(args['e2e-start'], quick ? 50_000 : 100_000, 'e2e-start'),
    e2eMaxSteps: num(args['e2e-steps'], quick ? 4 : 7, 'e2e-steps'),
    e2eConnections: 16,
    e2eBatch: 1000,
    probeIntervalMs: 100,
    // Each poll is an HTTP query QuestDB parses, runs and logs on the generator's CPU: ten a second
    // keep its cost small beside the load, at 100 ms resolution on delays of a second or more.
    probePollMs: 100,
    drainReadings: num(args['drain-readings'], quick ? 100_000 : 1_000_000, 'drain-readings'),
    idleSettleS: quick ? 2 : 5,
    modes: list(args.modes ?? 'process-crash,power-loss'),
    scenarios: list(args.scenarios ?? (compare === undefined ? ALL_SCENARIOS : COMPARE_SCENARIOS).join(',')),
    connections: list(args.connections ?? '1,16,64').map(Number),
    batches: list(args.batches ?? '100,1000').map((size) => num(size, 0, 'batches')),
    gatewayEnv: gatewayEnvOf(args['gateway-env'] ?? ''),
    batchConnections: num(args['batch-connections'], 16, 'batch-connections'),
    wrkThreads: num(args['wrk-threads'], 2, 'wrk-threads'),
    pinning:
      args['no-pin'] || cores < 2
        ? null
        : {
            gateway: args['gateway-cpus'] ?? '0',
            load: args['load-cpus'] ?? '1',
            questdb: args['questdb-cpus'] ?? (cores === 2 ? '1' : `2-${cores - 1}`),
          },
    workDir: args['work-dir'] ?? join(projectRoot, 'bench', '.work'),
    outDir: args.out ?? join(projectRoot, 'bench', 'results'),
    /** The build to compare with: a release version, a commit, or "previous"; undefined: no comparison. */
    compare,
  };
  for (const mode of options.modes)
    if (mode !== 'process-crash' && mode !== 'power-loss') throw new Error(`unknown durability mode ${mode}`);
  for (const s of options.scenarios)
    if (!ALL_SCENARIOS.includes(s)) throw new Error(`unknown scenario ${s}; known: ${ALL_SCENARIOS.join(', ')}`);
  if (compare !== undefined && options.scenarios.includes('e2e'))
    throw new Error('--compare cannot run e2e: its rate search takes a different course for each build; run it without --compare');
  // Thread digits 0..8 are wrk's in the readings' times; 9 is the harness's own fill.
  if (options.wrkThreads > 9) throw new Error('--wrk-threads must be 9 or fewer');
  if (options.drainReadings % 1000 !== 0) throw new Error('--drain-readings must be a multiple of 1000');
  return { help: false, keep: args.keep, options };
}

/** @typedef {NonNullable<ReturnType<typeof parseBenchArgs>['options']>} BenchOptions */
