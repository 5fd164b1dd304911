// The previous release (the newest CHANGELOG.md records, with its commit), built from git history
// and cached, and a queue it filled while QuestDB was unreachable: what the upgrade test starts the
// current build on. Also a CLI that writes that queue as the fixture the test falls back to when
// the clone lacks the commit (a shallow clone that cannot fetch it):
//   node scripts/lib/previous-release.mjs fixture
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGatewayProcess } from './gateway-process.mjs';
import { cacheDir, projectRoot } from './paths.mjs';
import { freePort } from './ports.mjs';
import { previousRelease } from './releases.mjs';

const previous = previousRelease();
/** The previous release's name, as its tag would be. */
export const PREVIOUS_RELEASE = `v${previous.version}`;
/** The queue file format PREVIOUS_RELEASE writes (its CHANGELOG.md section says). */
export const PREVIOUS_QUEUE_FORMAT = previous.queueFormat;
/** The queue file the fixture command wrote from PREVIOUS_RELEASE, filled with `upgradeBatches()`. */
export const PREVIOUS_QUEUE_FIXTURE = join(projectRoot, 'test', 'fixtures', `queue-${PREVIOUS_RELEASE}.db`);
const API_KEY = 'upgrade-test-key-0123456789';

const git = (/** @type {string[]} */ args) =>
  execFileSync('git', args, { cwd: projectRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/** `commit` when the clone has it or can fetch it from origin (a shallow clone); undefined otherwise. */
function available(/** @type {string} */ commit) {
  const has = () => spawnSync('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: projectRoot, stdio: 'ignore' }).status === 0;
  if (has()) return commit;
  spawnSync('git', ['fetch', '--no-tags', '--depth=1', 'origin', commit], { cwd: projectRoot, stdio: 'ignore', timeout: 60_000 });
  return has() ? commit : undefined;
}

const run = (/** @type {string} */ command, /** @type {string[]} */ args, /** @type {string} */ cwd) => {
  const env = { ...process.env };
  // better-sqlite3 compiles from source; node-gyp finds the headers the machine ships.
  if (env.npm_config_nodedir === undefined && existsSync('/usr/include/node/node.h')) env.npm_config_nodedir = '/usr';
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed in ${cwd}: ${(result.stderr ?? '').slice(-4000)}`);
};

/**
 * The bundle of `release`, built once per commit, Node ABI and architecture into the cache directory
 * (built under a temporary name and renamed, so concurrent runs never see half a build).
 * @returns {{ bundle: string, commit: string } | { unavailable: string }}
 */
export function previousReleaseBundle(release = previous) {
  const tag = `v${release.version}`;
  const commit = available(release.commit);
  if (commit === undefined) return { unavailable: `the clone has no commit ${release.commit} (${tag}) and cannot fetch it` };
  const releases = join(cacheDir(), 'releases');
  mkdirSync(releases, { recursive: true });
  const dir = join(releases, `${tag}-${commit.slice(0, 12)}-node${process.versions.modules}-${process.arch}`);
  const bundle = join(dir, 'dist', 'gateway.mjs');
  if (existsSync(bundle)) return { bundle, commit };
  const partial = `${dir}.${process.pid}.part`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial);
  try {
    const archive = join(partial, 'source.tar');
    git(['archive', '--output', archive, commit]);
    run('tar', ['-xf', archive], partial);
    rmSync(archive);
    run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], partial);
    run('npm', ['run', 'build'], partial);
    run('npm', ['prune', '--omit=dev', '--no-audit', '--no-fund'], partial);
    try {
      renameSync(partial, dir);
    } catch (error) {
      // Another run finished the same build first; theirs serves.
      if (!existsSync(bundle)) throw error;
    }
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
  return { bundle, commit };
}

/** The readings the old release queues: 40 requests of 25, every value distinct. */
export function upgradeBatches() {
  return Array.from({ length: 40 }, (_, request) =>
    Array.from({ length: 25 }, (_, i) => {
      const n = request * 25 + i;
      return {
        time: `2026-03-01T00:${String(request).padStart(2, '0')}:00.${String(i).padStart(6, '0')}Z`,
        ship_id: 'upgrade-ship',
        cargo_id: `c${i % 5}`,
        value: n,
      };
    }),
  );
}

/**
 * Runs `bundle` on `dataDir` with QuestDB unreachable, pushes `upgradeBatches()` (each answered
 * 200), and stops it gracefully. Returns the readings its /status counted as queued.
 * @param {{ bundle: string, dataDir: string }} options
 */
export async function fillQueueWith({ bundle, dataDir }) {
  const gateway = await startGatewayProcess({
    bundle,
    env: {
      API_KEY,
      DATA_DIR: dataDir,
      QUESTDB_URL: `http://127.0.0.1:${await freePort()}`,
      QUESTDB_TABLE: 'upgrade_unreachable',
      RETENTION_DAYS: '0',
      HEALTH_REPORT: 'false',
      SHUTDOWN_TIMEOUT_MS: '500',
    },
  });
  /** @type {number} */
  let readings;
  try {
    readings = await pushUpgradeBatches(gateway.url);
  } catch (error) {
    // A release that exits badly explains the failed push better than the push does.
    await stopGracefully(gateway);
    throw error;
  }
  await stopGracefully(gateway);
  return readings;
}

/** Pushes `upgradeBatches()`, each to be answered 200; returns the readings /status counts as queued. */
async function pushUpgradeBatches(/** @type {string} */ url) {
  for (const batch of upgradeBatches()) {
    const response = await fetch(`${url}/api/v2/ingest/batch`, {
      method: 'POST',
      headers: { 'x-api-key': API_KEY },
      body: JSON.stringify(batch),
    });
    if (response.status !== 200) throw new Error(`the previous release answered ${response.status}: ${await response.text()}`);
  }
  const status = /** @type {{ queue: { readings: number } }} */ (
    await (await fetch(`${url}/status`, { headers: { 'x-api-key': API_KEY } })).json()
  );
  return status.queue.readings;
}

async function stopGracefully(/** @type {import('./gateway-process.mjs').GatewayProcess} */ gateway) {
  gateway.child.kill('SIGTERM');
  const exit = await gateway.exited;
  if (exit.code !== 0) throw new Error(`the previous release exited with ${exit.code ?? exit.signal}: ${gateway.stderr()}`);
}

if (import.meta.url === `file://${process.argv[1]}` && process.argv[2] === 'fixture') {
  const release = previousReleaseBundle();
  if ('unavailable' in release) throw new Error(release.unavailable);
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-fixture-'));
  try {
    const queued = await fillQueueWith({ bundle: release.bundle, dataDir });
    mkdirSync(join(projectRoot, 'test', 'fixtures'), { recursive: true });
    copyFileSync(join(dataDir, 'queue.db'), PREVIOUS_QUEUE_FIXTURE);
    process.stdout.write(`${PREVIOUS_QUEUE_FIXTURE}: ${queued} readings queued by ${PREVIOUS_RELEASE} (${release.commit})\n`);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
