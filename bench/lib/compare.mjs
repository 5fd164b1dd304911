// `npm run bench -- --compare REF`: the build REF names (a release CHANGELOG.md records, or any
// commit), and each figure of both builds with this build's ratio to REF's. Runs are paired (the
// harness runs both builds one after the other, alternating which goes first), so each pair's ratio
// saw the same machine; the spread of those ratios says how far the comparison can be trusted.
import { spawnSync } from 'node:child_process';
import { previousReleaseBundle } from '../../scripts/lib/previous-release.mjs';
import { projectRoot } from '../../scripts/lib/paths.mjs';
import { previousRelease, releases } from '../../scripts/lib/releases.mjs';
import { pairedRatios, ratioMark, summarize } from '../../scripts/lib/stats.mjs';
import { cell } from './report.mjs';

/**
 * The release or commit `ref` names: "previous" (the newest release CHANGELOG.md records), a
 * release's version ("0.4.0" or "v0.4.0"), or anything git resolves to a commit.
 * @param {string} ref
 * @returns {{ version: string, commit: string, name: string }}
 */
export function resolveRef(ref) {
  if (ref === 'previous') {
    const release = previousRelease();
    return { ...release, name: release.version };
  }
  const release = releases().find((r) => r.version === ref.replace(/^v/, ''));
  if (release !== undefined) return { ...release, name: release.version };
  const done = spawnSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], { cwd: projectRoot, encoding: 'utf8' });
  if (done.status !== 0) throw new Error(`--compare ${ref}: neither a release in CHANGELOG.md nor a commit git knows`);
  const commit = done.stdout.trim();
  return { version: 'commit', commit, name: commit.slice(0, 12) };
}

/**
 * REF's bundle, built from its commit into the cache (once per commit) as the upgrade test builds
 * the previous release.
 * @param {string} ref
 * @returns {{ name: string, commit: string, bundle: string }}
 */
export function comparedBuild(ref) {
  const release = resolveRef(ref);
  const built = previousReleaseBundle({ version: release.version, date: '', commit: release.commit, queueFormat: 0 });
  if ('unavailable' in built) throw new Error(`--compare ${ref}: ${built.unavailable}`);
  return { name: release.name, commit: built.commit, bundle: built.bundle };
}

/**
 * The figures compared: what each is called, where it is in a run, and which way is better.
 * @typedef {{ figure: string, scenario: 'idle' | 'single' | 'batch' | 'drain', key: (run: any) => string, pick: (run: any) => number | null | undefined, higherIsBetter: boolean, digits: number }} Figure
 */

/**
 * A load's figures: its rate, its p99 and the gateway's CPU per million readings.
 * @param {string} load
 * @param {'single' | 'batch'} scenario
 * @param {(run: any) => string} key
 * @param {string} rate  the rate's name
 * @param {(run: any) => number} pickRate
 * @returns {Figure[]}
 */
const loadFigures = (load, scenario, key, rate, pickRate) => [
  { figure: `${load}, ${rate}`, scenario, key, pick: pickRate, higherIsBetter: true, digits: 0 },
  { figure: `${load}, p99 ms`, scenario, key, pick: (r) => r.latencyMs.p99, higherIsBetter: false, digits: 2 },
  {
    figure: `${load}, gateway CPU-s per million readings`,
    scenario,
    key,
    pick: (r) => r.footprint.cpuSecondsPerMillion,
    higherIsBetter: false,
    digits: 1,
  },
];

/** @type {Figure[]} */
const FIGURES = [
  ...loadFigures(
    'single push',
    'single',
    (r) => `${r.mode}, ${r.connections} conn.`,
    'requests/s',
    (r) => r.requestsPerSec,
  ),
  ...loadFigures(
    'batch push',
    'batch',
    (r) => `${r.mode}, batch ${r.batch}`,
    'readings/s',
    (r) => r.readingsPerSec,
  ),
  { figure: 'idle RSS, MB', scenario: 'idle', key: (r) => r.mode, pick: (r) => r.rssKb / 1024, higherIsBetter: false, digits: 1 },
  {
    figure: 'idle anonymous memory, MB',
    scenario: 'idle',
    key: (r) => r.mode,
    pick: (r) => (r.anonKb === undefined ? null : r.anonKb / 1024),
    higherIsBetter: false,
    digits: 1,
  },
  {
    figure: 'drain, readings/s into QuestDB',
    scenario: 'drain',
    key: (r) => r.mode,
    pick: (r) => r.flushedReadingsPerSec,
    higherIsBetter: true,
    digits: 0,
  },
];

/**
 * Each figure of both builds and this build's ratio to the reference's: the median of the ratios of
 * the runs paired by their number, with their spread.
 * @param {Record<string, any[]>} reference  the compared build's runs, by scenario
 * @param {Record<string, any[]>} current    this build's runs, by scenario
 */
export function compareRuns(reference, current) {
  const rows = [];
  for (const f of FIGURES) {
    const keys = [...new Set((current[f.scenario] ?? []).map(f.key))];
    for (const key of keys) {
      /** @param {any[] | undefined} runs */
      const these = (runs) => (runs ?? []).filter((r) => f.key(r) === key);
      const a = these(reference[f.scenario]);
      const b = these(current[f.scenario]);
      rows.push({
        figure: f.figure,
        key,
        higherIsBetter: f.higherIsBetter,
        digits: f.digits,
        reference: summarize(a.map(f.pick)),
        current: summarize(b.map(f.pick)),
        ratio: pairedRatios(a, b, f.pick),
      });
    }
  }
  return rows;
}

/**
 * The comparison as a Markdown table, as each release's CHANGELOG entry carries it.
 * @param {ReturnType<typeof compareRuns>} rows
 * @param {{ name: string, commit: string }} reference
 * @param {{ name: string, commit: string }} current
 */
export function renderComparison(rows, reference, current) {
  const lines = [
    `#### ${current.name} (${current.commit.slice(0, 12)}) against ${reference.name} (${reference.commit.slice(0, 12)}), runs alternated`,
    '',
    `Cells are median (min–max) over the runs; the ratio is ${current.name} ÷ ${reference.name}, the median of the runs' pairwise ratios (min–max), ↑ or ↓ where the whole spread is better or worse.`,
    '',
    `| Figure | | ${reference.name} | ${current.name} | Ratio |`,
    '|---|---|---:|---:|---:|',
  ];
  for (const row of rows) {
    const mark = ratioMark(row.ratio, row.higherIsBetter);
    lines.push(
      `| ${row.figure} | ${row.key} | ${cell(row.reference, row.digits)} | ${cell(row.current, row.digits)} | ${cell(row.ratio, 2)}${mark ? ` ${mark}` : ''} |`,
    );
  }
  if (rows.length === 0) lines.push(`| no figure | | | | |`);
  lines.push('');
  return lines.join('\n');
}
