import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createPowercutDisk } from '../scripts/lib/powercut-fs.mjs';
import { queuePath } from '../src/queue/queue-file.js';
import { QueueWriter } from '../src/queue/queue-writer.js';

// SQLite fsyncs a new WAL's directory once and ignores that fsync's error: after a failed directory
// fsync, commits went into a WAL whose name a power cut could take. The queue makes the names
// durable itself and fails the open when it cannot.
type Disk = Awaited<ReturnType<typeof createPowercutDisk>>;
let disk: Disk | undefined;

afterEach(async () => {
  await disk?.remove();
  disk = undefined;
});

const open = (dataDir: string) => QueueWriter.open({ dataDir, durability: 'power-loss', maxBytes: 1024 * 1024 });

const queuedPayloads = (dataDir: string): string[] => {
  const db = new Database(queuePath(dataDir), { readonly: true });
  try {
    return (db.prepare('SELECT payload FROM segment_1 ORDER BY id').all() as { payload: string }[]).map((row) => row.payload);
  } finally {
    db.close();
  }
};

describe('the queue file on a disk whose directory fsync fails', () => {
  it('refuses to open when its WAL cannot be made durable, and keeps what it commits after the next open through a power cut', async () => {
    disk = await createPowercutDisk();
    let fs = await disk.mount();
    const dataDir = join(fs.mountPoint, 'data');
    const first = open(dataDir);
    await first.append('1\tship\tcargo\t1', 1, 1000);
    first.close();
    // The clean close deleted the WAL; everything up to here is on the disk.
    await fs.writeBack();

    await fs.failDirFsyncs(1);
    expect(() => open(dataDir)).toThrow(expect.objectContaining({ code: 'EIO' }));

    const second = open(dataDir);
    await second.append('2\tship\tcargo\t2', 1, 2000);
    await fs.cut();
    second.close();
    await fs.unmount();

    fs = await disk.mount();
    const reopened = open(join(fs.mountPoint, 'data'));
    reopened.close();
    expect(queuedPayloads(join(fs.mountPoint, 'data'))).toEqual(['1\tship\tcargo\t1', '2\tship\tcargo\t2']);
    await fs.unmount();
  });
});
