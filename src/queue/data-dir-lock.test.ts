import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { DataDirInUseError, DataDirLock, FileLock, describeOwner, ownDataDir, readLockOwner } from './data-dir-lock.js';
import { tempDir } from '../../test/support/temp-dir.js';

// One process here: SQLite keeps POSIX locks apart between the connections of a process too.
// Other processes, file systems and kill -9 are test/data-dir-owner.test.ts.

describe('DataDirLock', () => {
  it('lets one owner in, says who it is, and lets the next in once it let go', async () => {
    const dataDir = tempDir('lock');
    const first = await ownDataDir(dataDir);
    expect(readLockOwner(dataDir)).toEqual({ command: 'serve', pid: process.pid, hostname: hostname(), since: first.owner.since });
    const refused = await ownDataDir(dataDir).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(DataDirInUseError);
    expect((refused as Error).message).toContain(`\`serve\`, pid ${process.pid}, since`);
    first.release();
    expect(existsSync(join(dataDir, 'owner.json'))).toBe(false);
    const second = await ownDataDir(dataDir);
    expect(second.held).toBe(true);
    second.release();
  });

  it('is held against a worker thread of the same process', async () => {
    const dataDir = tempDir('lock');
    const lock = await ownDataDir(dataDir);
    const script = `
      const { workerData, parentPort } = require('node:worker_threads');
      const Database = require(workerData.sqlite);
      const db = new Database(workerData.path, { timeout: 0 });
      db.pragma('locking_mode = EXCLUSIVE');
      try { db.exec('BEGIN EXCLUSIVE; COMMIT'); parentPort.postMessage('taken'); } catch (e) { parentPort.postMessage(e.code); }
      db.close();`;
    const answer = await new Promise((resolve, reject) => {
      const worker = new Worker(script, {
        eval: true,
        workerData: { sqlite: require.resolve('better-sqlite3'), path: join(dataDir, 'owner.lock') },
      });
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    expect(answer).toBe('SQLITE_BUSY');
    lock.release();
  });

  it('makes a starting gateway wait for a CLI command that holds the directory for a moment', async () => {
    const dataDir = tempDir('lock');
    const command = await DataDirLock.take(dataDir, 'dead-letters purge');
    if (!(command instanceof DataDirLock)) throw new Error('not taken');
    const startedAt = Date.now();
    setTimeout(() => command.release(), 300);
    const gateway = await ownDataDir(dataDir);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(250);
    // A command finding the gateway there does not wait: it works beside it.
    const beside = await DataDirLock.take(dataDir, 'dead-letters requeue');
    expect(beside).toEqual({ heldBy: gateway.owner });
    gateway.release();
  });

  it('gives up on a command that keeps the directory beyond the wait', async () => {
    const dataDir = tempDir('lock');
    const command = await DataDirLock.take(dataDir, 'keys add');
    const other = await DataDirLock.take(dataDir, 'dead-letters purge', 200);
    expect(other).toEqual({ heldBy: expect.objectContaining({ command: 'keys add', pid: process.pid }) });
    (command as DataDirLock).release();
  });

  it('describes an owner it cannot name, and one in another container', () => {
    expect(describeOwner(undefined)).toMatch(/did not record who it is/);
    expect(describeOwner({ command: 'serve', pid: 1, hostname: 'gateway-container', since: '2026-11-26T10:00:00.000Z' })).toBe(
      '`serve`, pid 1 on host gateway-container (another machine or container: its own process ids), since 2026-11-26T10:00:00.000Z',
    );
  });

  it('decides by the lock, never by the owner record: a stale record does not keep anyone out', async () => {
    const dataDir = tempDir('lock');
    writeFileSync(join(dataDir, 'owner.json'), JSON.stringify({ command: 'serve', pid: 999_999, hostname: hostname(), since: 'then' }));
    const lock = await ownDataDir(dataDir);
    expect(JSON.parse(readFileSync(join(dataDir, 'owner.json'), 'utf8'))).toMatchObject({ pid: process.pid });
    lock.release();
  });
});

describe('FileLock', () => {
  it('waits for the holder to let go, or gives up after the wait', async () => {
    const path = join(tempDir('lock'), 'api-keys.lock');
    const holder = FileLock.tryTake(path)!;
    expect(FileLock.tryTake(path)).toBeUndefined();
    expect(await FileLock.take(path, 100)).toBeUndefined();
    setTimeout(() => holder.release(), 150);
    const next = await FileLock.take(path, 5000);
    expect(next?.held).toBe(true);
    next?.release();
  });
});
