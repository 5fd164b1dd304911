// The board reads a queue file's format without SQLite, as the next open will: a trial cut short
// after upgrading the file leaves the upgrade in the log, and the header still names the old format.
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { queueFormatOf } from '../../appliance/board/handover.mjs';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * A queue file at format 4 in its header, with `versions` committed after it in its log
 * only, copied while the writer still holds it open (as a power cut leaves it).
 */
function cutWithLog(versions: number[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'harbor-queue-format-'));
  dirs.push(dir);
  const live = join(dir, 'live.db');
  const db = new Database(live);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('CREATE TABLE t (x)');
  db.pragma('user_version = 4');
  db.pragma('wal_checkpoint(TRUNCATE)');
  for (const version of versions) {
    db.transaction(() => {
      db.prepare('INSERT INTO t VALUES (?)').run('x'.repeat(5000));
      db.pragma(`user_version = ${version}`);
    })();
  }
  const cut = join(dir, 'queue.db');
  copyFileSync(live, cut);
  if (existsSync(`${live}-wal`)) copyFileSync(`${live}-wal`, `${cut}-wal`);
  db.close();
  return cut;
}

/** What SQLite itself reads from the file and its log. */
function sqliteReads(path: string): number {
  const db = new Database(path);
  try {
    return db.pragma('user_version', { simple: true }) as number;
  } finally {
    db.close();
  }
}

describe('the queue format the board reads', () => {
  it('is the upgrade committed in the log, which the header does not show yet', () => {
    const cut = cutWithLog([5]);
    expect(readFileSync(cut).readUInt32BE(60)).toBe(4);
    expect(queueFormatOf(cut)).toBe(5);
    expect(sqliteReads(cut)).toBe(5);
  });

  it('is the last committed one when the log ends in a torn frame', () => {
    const cut = cutWithLog([5, 6]);
    const wal = `${cut}-wal`;
    // Cut into the last frame: its checksum fails, so the commit of 6 never happened.
    truncateSync(wal, readFileSync(wal).length - 100);
    expect(queueFormatOf(cut)).toBe(sqliteReads(cut));
    expect(queueFormatOf(cut)).toBe(5);
  });

  it('ignores a log whose header does not hold, and a file that is not a log', () => {
    const cut = cutWithLog([5]);
    const wal = readFileSync(`${cut}-wal`);
    // Another salt in the header: its checksum fails, and SQLite reads none of the frames.
    wal.writeUInt32BE((wal.readUInt32BE(16) + 1) >>> 0, 16);
    writeFileSync(`${cut}-wal`, wal);
    expect(queueFormatOf(cut)).toBe(4);
    writeFileSync(`${cut}-wal`, 'not a log');
    expect(queueFormatOf(cut)).toBe(4);
  });

  it('is the header without a log, and undefined without a file', () => {
    const cut = cutWithLog([]);
    rmSync(`${cut}-wal`, { force: true });
    expect(queueFormatOf(cut)).toBe(4);
    expect(queueFormatOf(join(cut, 'missing'))).toBeUndefined();
  });
});
