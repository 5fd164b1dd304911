import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { createPowercutDisk } from '../scripts/lib/powercut-fs.mjs';
import { hashKey } from '../src/keys/key-hash.js';
import { readKeyFile, writeKeyFile } from '../src/keys/key-file.js';
import {
  Checkpointer,
  type CheckpointFiles,
  closeCheckpointFiles,
  newCheckpointState,
  openCheckpointFiles,
  QueueSyncLostError,
} from '../src/queue/checkpoint.js';
import { LogSync } from '../src/queue/log-sync.js';
import { queuePath } from '../src/queue/queue-file.js';
import { QueueWriter } from '../src/queue/queue-writer.js';
import { loadServerCertificate } from '../src/tls/certificate-store.js';

// The gateway's own files on a disk that loses, at a power cut, every change not made durable:
// what it has said is written must survive, including the names of the files and directories it
// made (a directory's new entries are durable only once the directory itself is fsynced).

type Disk = Awaited<ReturnType<typeof createPowercutDisk>>;
type PowercutMount = Awaited<ReturnType<Disk['mount']>>;
let disk: Disk | undefined;

afterEach(async () => {
  await disk?.remove();
  disk = undefined;
});

const DATA_DIR = join('site', 'data');

/**
 * Appends a reading to a queue in DATA_DIR on the mount (made there if missing), cuts the power
 * once the append is answered, mounts again and counts the readings the queue holds.
 */
async function readingsAfterACut(d: Disk, fs: PowercutMount): Promise<number> {
  const queue = QueueWriter.open({ dataDir: join(fs.mountPoint, DATA_DIR), durability: 'power-loss', maxBytes: 1 << 20 });
  await queue.append('1\tship\tcargo\t1', 1, 1);
  await fs.cut();
  queue.close();
  await fs.unmount();
  const again = await d.mount();
  const reopened = QueueWriter.open({ dataDir: join(again.mountPoint, DATA_DIR), durability: 'power-loss', maxBytes: 1 << 20 });
  try {
    return reopened.stats().readings;
  } finally {
    reopened.close();
  }
}

describe('the gateway’s files through a power cut', () => {
  it('keeps a reading answered into a data directory the queue made on its first start', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    expect(await readingsAfterACut(disk, fs)).toBe(1);
  });

  it('keeps a reading answered into a data directory the self-signed certificate made first, as a start does', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    loadServerCertificate({
      certFile: undefined,
      keyFile: undefined,
      credentialsDirectory: undefined,
      dataDir: join(fs.mountPoint, DATA_DIR),
    });
    expect(await readingsAfterACut(disk, fs)).toBe(1);
    expect(existsSync(join(disk.backing, DATA_DIR, 'tls', 'cert.pem'))).toBe(true);
  });

  it('keeps a reading answered into a data directory made before without an fsync, as a failed start or a command leaves it', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    mkdirSync(join(fs.mountPoint, DATA_DIR), { recursive: true });
    expect(await readingsAfterACut(disk, fs)).toBe(1);
  });

  it('removes the data directory it made when the fsync naming it fails, so the next start makes it anew', async () => {
    disk = await createPowercutDisk({ fsyncEio: 1 });
    const fs = await disk.mount();
    const dataDir = join(fs.mountPoint, DATA_DIR);
    expect(() => QueueWriter.open({ dataDir, durability: 'power-loss', maxBytes: 1 << 20 })).toThrow(/EIO/);
    expect(existsSync(join(fs.mountPoint, 'site'))).toBe(false);
    expect(() => loadServerCertificate({ certFile: undefined, keyFile: undefined, credentialsDirectory: undefined, dataDir })).toThrow(
      /EIO/,
    );
    expect(existsSync(join(fs.mountPoint, 'site'))).toBe(false);
  });

  it('keeps a device key once the key file is written', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    writeKeyFile(join(fs.mountPoint, 'api-keys'), [{ name: 'pump-7', hash: hashKey('a-device-key-0123456789') }]);

    await fs.cut();
    await fs.unmount();

    expect(readKeyFile(join(disk.backing, 'api-keys')).entries.map((entry) => entry.name)).toEqual(['pump-7']);
  });
});

const open = (dataDir: string) => QueueWriter.open({ dataDir, durability: 'power-loss', maxBytes: 1024 * 1024 });

/** A queue in `data` on a new disk with one reading on the disk, closed cleanly (no WAL left). */
async function queueWithOneReading(): Promise<{ fs: PowercutMount; dataDir: string }> {
  disk = await createPowercutDisk();
  const fs = await disk.mount();
  const dataDir = join(fs.mountPoint, DATA_DIR);
  const queue = open(dataDir);
  await queue.append('1\tship\tcargo\t1', 1, 1000);
  queue.close();
  await fs.writeBack();
  return { fs, dataDir };
}

/** The payloads in the queue after a power cut under the open queue: the disk mounted again and the queue opened. */
async function payloadsAfterCut(fs: PowercutMount, queue: QueueWriter): Promise<string[]> {
  await fs.cut();
  queue.close();
  await fs.unmount();
  const again = await (disk as Disk).mount();
  const dataDir = join(again.mountPoint, DATA_DIR);
  open(dataDir).close();
  const db = new Database(queuePath(dataDir), { readonly: true });
  try {
    return (db.prepare('SELECT payload FROM segment_1 ORDER BY id').all() as { payload: string }[]).map((row) => row.payload);
  } finally {
    db.close();
    await again.unmount();
  }
}

// A failed fsync leaves data readable that the disk does not hold. SQLite trusts what it reads: a
// directory fsync whose error it ignores, a WAL commit an earlier process could not fsync. The
// queue puts on the disk what it will rely on, or does not start.
describe('the queue file on a disk whose fsyncs fail', () => {
  it('refuses to open when its WAL cannot be named durably, and keeps what it commits after the next open through a power cut', async () => {
    const { fs, dataDir } = await queueWithOneReading();

    await fs.failFsyncs('dir');
    expect(() => open(dataDir)).toThrow(expect.objectContaining({ code: 'EIO' }));

    const queue = open(dataDir);
    await queue.append('2\tship\tcargo\t2', 1, 2000);
    expect(await payloadsAfterCut(fs, queue)).toEqual(['1\tship\tcargo\t1', '2\tship\tcargo\t2']);
  });

  it('keeps what it commits after a process that died on a failed WAL fsync, through a power cut', async () => {
    const { fs, dataDir } = await queueWithOneReading();

    // Another process commits a record, then one whose fsync fails, and dies without closing the file.
    const child = spawn(
      process.execPath,
      [
        '-e',
        `const db = new (require('better-sqlite3'))(process.argv[1]);
         db.pragma('journal_mode = WAL');
         db.pragma('synchronous = FULL');
         const insert = db.prepare("INSERT INTO segment_1 (received_ms, readings, bytes, payload, site, sink) VALUES (?, 1, 20, ?, NULL, NULL)");
         insert.run(1500, 'committed before');
         process.stdout.write('committed\\n');
         process.stdin.once('data', () => {
           try { insert.run(1600, 'refused'); } catch (error) { require('node:fs').writeSync(1, error.code); }
           process.kill(process.pid, 'SIGKILL');
         });`,
        queuePath(dataDir),
      ],
      { cwd: projectRoot, stdio: ['pipe', 'pipe', 'inherit'] },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const died = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    while (!output.includes('committed')) await new Promise((resolve) => setTimeout(resolve, 10));
    await fs.failFsyncs('file');
    child.stdin.write('go\n');
    expect({ signal: await died, output }).toEqual({ signal: 'SIGKILL', output: 'committed\nSQLITE_IOERR_FSYNC' });

    const queue = open(dataDir);
    await queue.append('2\tship\tcargo\t2', 1, 2000);
    // The refused record may stay (its answer was an error, see docs/guarantees.md); the answered ones must.
    expect((await payloadsAfterCut(fs, queue)).filter((payload) => payload !== 'refused')).toEqual([
      '1\tship\tcargo\t1',
      'committed before',
      '2\tship\tcargo\t2',
    ]);
  });
});

// In power-loss mode ingest syncs the log of its commits itself, off the event loop, and answers
// an append only after that sync (src/queue/log-sync.ts).
describe('ingest’s log sync on a disk whose fsyncs fail', () => {
  it('fails when a sink’s commit failed to sync the pages that wait for it, as Linux reports a failed writeback to every descriptor open then', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    const path = join(fs.mountPoint, 'queue.db');
    const ingest = new Database(path);
    for (const pragma of ['journal_mode = WAL', 'synchronous = NORMAL', 'wal_autocheckpoint = 0']) ingest.pragma(pragma);
    ingest.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const sync = new LogSync(path);
    sync.now();
    ingest.prepare('INSERT INTO t (v) VALUES (?)').run('committed, waiting for its sync');
    const sink = new Database(path);
    sink.pragma('synchronous = FULL');

    // The sink's commit syncs the log, ingest's waiting pages with it; the disk drops them.
    await fs.failFsyncs('file');
    expect(() => sink.prepare('INSERT INTO t (v) VALUES (?)').run('a mark')).toThrow(
      expect.objectContaining({ code: 'SQLITE_IOERR_FSYNC' }),
    );
    const failed = await new Promise<Error | null>((resolve) => sync.start(resolve));
    expect(failed).toMatchObject({ code: 'EIO' });
    // Reported once, as the kernel does: what the queue does then is stop (the test above).
    expect(() => sync.now()).not.toThrow();

    sync.close();
    sink.close();
    ingest.close();
  });
});

/**
 * A log of 400 rows written while a reader holds a snapshot of the first 200, on a new disk: a
 * checkpoint now copies only the first half. Returns the writer, the reader and an insert.
 */
async function logBehindASnapshot(): Promise<{
  fs: PowercutMount;
  path: string;
  db: Database.Database;
  reader: Database.Database;
  insert: (tag: string) => void;
}> {
  disk = await createPowercutDisk();
  const fs = await disk.mount();
  const path = join(fs.mountPoint, 'queue.db');
  const db = new Database(path);
  for (const pragma of ['page_size = 1024', 'journal_mode = WAL', 'synchronous = FULL', 'wal_autocheckpoint = 0']) db.pragma(pragma);
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  const statement = db.prepare('INSERT INTO t (v) VALUES (?)');
  const insert = (tag: string): void => void statement.run(tag.repeat(300));
  for (let i = 0; i < 200; i++) insert('a');
  const reader = new Database(path);
  reader.exec('BEGIN');
  reader.prepare('SELECT COUNT(*) FROM t').get();
  for (let i = 0; i < 200; i++) insert('b');
  return { fs, path, db, reader, insert };
}

/** Cuts the power, closes the connections (and the checkpoints' files) on the dead disk, mounts again: the file's check and its row count. */
async function afterCut(
  fs: PowercutMount,
  connections: Database.Database[],
  files?: CheckpointFiles,
): Promise<{ check: unknown; rows: unknown }> {
  await fs.cut();
  for (const connection of connections) connection.close();
  if (files !== undefined) closeCheckpointFiles(files);
  await fs.unmount();
  const again = await (disk as Disk).mount();
  const db = new Database(join(again.mountPoint, 'queue.db'));
  try {
    return { check: db.pragma('integrity_check', { simple: true }), rows: db.prepare('SELECT COUNT(*) AS n FROM t').pluck().get() };
  } catch (error) {
    return { check: (error as Error).message, rows: undefined };
  } finally {
    db.close();
    await again.unmount();
  }
}

// SQLite records a checkpoint that could copy only part of the log without an fsync of the file;
// when the next checkpoint's fsync fails, the kernel drops those pages, and a checkpoint after it
// starts past them. The queue fsyncs after each checkpoint, and stops checkpointing when that
// fsync fails (src/queue/checkpoint.ts).
describe('checkpoints of the queue file on a disk whose fsyncs fail', () => {
  it('SQLite left to itself: the checkpoint after the failed one lets the log start over, and a power cut malforms the file', async () => {
    const { fs, db, reader, insert } = await logBehindASnapshot();
    expect(db.pragma('wal_checkpoint(PASSIVE)')).toEqual([{ busy: 0, log: expect.any(Number), checkpointed: expect.any(Number) }]);
    reader.exec('COMMIT');
    await fs.failFsyncs('file');
    expect(() => db.pragma('wal_checkpoint(PASSIVE)')).toThrow(expect.objectContaining({ code: 'SQLITE_IOERR_FSYNC' }));
    db.pragma('wal_checkpoint(PASSIVE)');
    for (let i = 0; i < 20; i++) insert('c');

    expect(await afterCut(fs, [db, reader])).toEqual({ check: 'database disk image is malformed', rows: undefined });
  });

  it('the queue’s checkpoint puts a partial copy on the disk, so one after a failed fsync copies what that one lost, and a power cut keeps every commit', async () => {
    const { fs, path, db, reader, insert } = await logBehindASnapshot();
    const lost: QueueSyncLostError[] = [];
    const files = openCheckpointFiles(path);
    const checkpointer = new Checkpointer(db, newCheckpointState(), files, (error) => lost.push(error));
    const partial = checkpointer.run('PASSIVE');
    expect(partial.checkpointed).toBeGreaterThan(0);
    expect(partial.checkpointed).toBeLessThan(partial.log);
    reader.exec('COMMIT');
    await fs.failFsyncs('file');

    // SQLite's own fsync failed: it recorded nothing, and the next checkpoint copies those pages again.
    expect(() => checkpointer.run('PASSIVE')).toThrow(expect.objectContaining({ code: 'SQLITE_IOERR_FSYNC' }));
    expect(checkpointer.run('PASSIVE')).toMatchObject({ busy: 0 });
    for (let i = 0; i < 20; i++) insert('c');
    expect(lost).toEqual([]);

    expect(await afterCut(fs, [db, reader], files)).toEqual({ check: 'ok', rows: 420 });
  });

  it('when the fsync after a partial copy fails, no connection of the process checkpoints again, and a power cut keeps every commit', async () => {
    const { fs, path, db, reader, insert } = await logBehindASnapshot();
    const state = newCheckpointState();
    const lost: QueueSyncLostError[] = [];
    const files = openCheckpointFiles(path);
    const checkpointer = new Checkpointer(db, state, files, (error) => lost.push(error));
    await fs.failFsyncs('file');

    expect(() => checkpointer.run('PASSIVE')).toThrow(QueueSyncLostError);
    expect(lost.map((error) => (error.cause as { code?: string }).code)).toEqual(['EIO']);
    reader.exec('COMMIT');
    // Another connection sharing the state (the delivery thread's) checkpoints no more either.
    const other = new Checkpointer(reader, state, files, (error) => lost.push(error));
    expect(() => other.run('TRUNCATE')).toThrow(QueueSyncLostError);
    // A log past the thousand pages that call for a checkpoint, within the first 4,096 the
    // wal-index maps at once: a cut undoes that index's growth under the open connections.
    for (let i = 0; i < 1000; i++) {
      insert('c');
      checkpointer.afterCommit();
    }
    expect(lost).toHaveLength(1);

    expect(await afterCut(fs, [db, reader], files)).toEqual({ check: 'ok', rows: 1400 });
  });
});
