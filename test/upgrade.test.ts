import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, inject, it } from 'vitest';
import {
  PREVIOUS_QUEUE_FIXTURE,
  PREVIOUS_QUEUE_FORMAT,
  PREVIOUS_RELEASE,
  fillQueueWith,
  previousReleaseBundle,
  upgradeBatches,
} from '../scripts/lib/previous-release.mjs';
import { QUEUE_FORMAT, readQueueFormat } from '../src/queue/queue-format.js';
import { TEST_KEY } from './support/gateway.js';
import { spawnGateway } from './support/process.js';
import { sql, storedCounts, uniqueTable } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

const readings = upgradeBatches().flat().length;

/**
 * Starts the current build on `dataDir`, whose queue file has format `format`, and checks that the
 * queued readings reach QuestDB once each and the file ends in this release's format.
 */
async function expectBacklogDeliveredOnce(dataDir: string, format: number): Promise<void> {
  const queueFile = join(dataDir, 'queue.db');
  expect(readQueueFormat(queueFile).version).toBe(format);
  // A table of its own: every row in it came from the old queue.
  const table = uniqueTable('upgrade');
  const gateway = await spawnGateway({
    API_KEY: TEST_KEY,
    SITE_ID: 'upgraded site',
    DATA_DIR: dataDir,
    QUESTDB_TABLE: table,
    QUESTDB_URL: inject('questdbUrl'),
    FLUSH_INTERVAL_MS: '50',
  });
  try {
    const queued = async (): Promise<number> =>
      ((await (await fetch(`${gateway.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { queue: { readings: number } })
        .queue.readings;
    await expect.poll(queued, { timeout: 30_000, interval: 100 }).toBe(0);
    expect(await storedCounts(table)).toEqual({ rows: readings, distinct: readings });
    const sites = (await sql(`SELECT site, count() FROM "${table}" ORDER BY site`)).dataset;
    if (format < 5) {
      // Queued before a queue kept the site a reading was answered under: the gateway's own site's now.
      expect(sites).toEqual([['upgraded site', readings]]);
    } else {
      // From format 5 each reading keeps the site it was answered under, not the new gateway's name.
      expect(sites).toEqual([[expect.any(String), readings]]);
      expect(sites[0]?.[0]).not.toBe('upgraded site');
    }
  } finally {
    gateway.child.kill('SIGTERM');
    await gateway.exited;
  }
  expect(readQueueFormat(queueFile).version).toBe(QUEUE_FORMAT);
}

describe(`upgrade from ${PREVIOUS_RELEASE}`, () => {
  it('delivers the backlog the previous release queued with QuestDB unreachable, exactly once', async () => {
    const dataDir = tempDir('upgrade');
    const release = previousReleaseBundle();
    if ('unavailable' in release) {
      console.info(`upgrade test: ${release.unavailable}; using the queue ${PREVIOUS_QUEUE_FIXTURE} made from it instead`);
      copyFileSync(PREVIOUS_QUEUE_FIXTURE, join(dataDir, 'queue.db'));
    } else {
      console.info(`upgrade test: ${PREVIOUS_RELEASE} built from ${release.commit} fills the queue`);
      expect(await fillQueueWith({ bundle: release.bundle, dataDir })).toBe(readings);
    }
    await expectBacklogDeliveredOnce(dataDir, PREVIOUS_QUEUE_FORMAT);
  }, 600_000);

  // The previous release's queue, 0.4.0's and 0.3.0's (format 4), 0.2.0's (format 2) and the first
  // release's (format 1): each upgrades in place to this release's format.
  it.each([
    [basename(PREVIOUS_QUEUE_FIXTURE), PREVIOUS_QUEUE_FORMAT],
    ['queue-v0.4.0.db', 4],
    ['queue-v0.3.0.db', 4],
    ['queue-v0.2.0.db', 2],
    ['queue-v0.1.0.db', 1],
  ])('delivers the committed queue fixture %s (format %i), exactly once', async (fixture, format) => {
    const dataDir = tempDir('upgrade');
    copyFileSync(join(dirname(PREVIOUS_QUEUE_FIXTURE), fixture), join(dataDir, 'queue.db'));
    await expectBacklogDeliveredOnce(dataDir, format);
  });

  it('refuses to start on a queue file from a newer release: exit 78 (systemd does not restart), file unchanged', async () => {
    const dataDir = tempDir('newer');
    const queueFile = join(dataDir, 'queue.db');
    const db = new Database(queueFile);
    db.pragma('journal_mode = WAL');
    db.pragma(`user_version = ${QUEUE_FORMAT + 1}`);
    db.close();
    const before = readFileSync(queueFile);
    const run = spawnSync(process.execPath, [inject('bundlePath')], {
      env: {
        PATH: process.env['PATH'] ?? '',
        API_KEY: TEST_KEY,
        DATA_DIR: dataDir,
        QUESTDB_URL: 'http://127.0.0.1:9',
        PORT: '0',
        HOST: '127.0.0.1',
      },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.status).toBe(78);
    expect(run.stdout).toContain(
      `has format version ${QUEUE_FORMAT + 1}, newer than format version ${QUEUE_FORMAT} that this release reads`,
    );
    expect(readFileSync(queueFile).equals(before)).toBe(true);
    expect(readdirSync(dataDir)).toEqual(['queue.db']);
  });
});
