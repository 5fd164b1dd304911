import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { queuePath } from '../src/queue/queue-file.js';
import { QUEUE_FORMAT } from '../src/queue/queue-format.js';
import { QueueWriter } from '../src/queue/queue-writer.js';
import { tempDir } from './support/temp-dir.js';

it("fails the open rather than answer with the older format in the file's header while another process reads the file, and copies the upgrade at the next start", () => {
  const dataDir = tempDir('upgrade-reader');
  copyFileSync(join(import.meta.dirname, 'fixtures', 'queue-v0.4.0.db'), queuePath(dataDir));
  const header = () => readFileSync(queuePath(dataDir)).readUInt32BE(60);
  const open = () => QueueWriter.open({ dataDir, durability: 'power-loss', maxBytes: 1 << 20 });
  // A reader on the file's snapshot from before the upgrade: the upgrade cannot be copied into the file.
  const reader = new Database(queuePath(dataDir));
  reader.pragma('journal_mode = WAL');
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM sqlite_master').get();
  // The checkpoint waits for it the queue's busy timeout (10 s), then gives up.
  expect(open).toThrow(/format upgrade could not be copied into .*another process is reading it/);
  expect(header()).toBe(4);
  reader.exec('COMMIT');
  // The failed start left the upgrade in the log; the next copies it into the file, with the reader
  // still there (reading the current snapshot) as long as it holds no older one.
  const queue = open();
  expect(header()).toBe(QUEUE_FORMAT);
  queue.close();
  reader.close();
}, 30_000);
