import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { QueueReader } from '../queue/queue-reader.js';
import { QueueWriter } from '../queue/queue-writer.js';
import { parseBatch } from '../reading/parse-readings.js';
import { readingSchema } from '../reading/reading-schema.js';
import { tempDir } from '../../test/support/temp-dir.js';
import { exportQueue, queueCommand } from './queue-command.js';

const open: { close(): unknown }[] = [];
afterEach(() => {
  for (const queue of open.splice(0)) queue.close();
});

const writer = (dataDir: string) => {
  const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 16 * 1024 * 1024 });
  open.push(queue);
  return queue;
};
const digest = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { site: string | null; readings: number; body: string });

describe('queue export', () => {
  it('writes what is still queued as ingest batches with full times, a site per batch, and leaves the file as it was', async () => {
    const dataDir = tempDir('export');
    const queue = writer(dataDir);
    await queue.append('1767225600000000001\tship-a\tdelivered\t1', 1, 1);
    await queue.append('1767225600123456789\tship-a\ttemp\t-0\n1767225600123456790\tship-b\ttemp\t2.5e-7', 2, 2);
    await queue.append('1767225601000000000\tship-c\tlevel\t3', 1, 3, undefined, 'pier-7');
    // The local sink delivered the first record: it is not queued any more.
    const reader = new QueueReader(dataDir, 'process-crash', 'questdb');
    reader.complete(reader.readOldest(1, 1 << 20));
    reader.close();
    queue.close();

    const file = join(dataDir, 'queue.db');
    const before = digest(file);
    const out = join(tempDir('export-out'), 'readings.ndjson');
    expect(exportQueue({ file, out })).toEqual({ records: 2, readings: 3, batches: 2, corrupt: 0, deadLetters: 0 });
    expect(digest(file)).toBe(before);
    const [own, pier] = lines(out);
    expect(own).toMatchObject({ site: null, readings: 2 });
    expect(pier).toMatchObject({ site: 'pier-7', readings: 1 });
    // The body is the API's batch, which the gateway's own parser takes back to the same readings.
    const limits = { maxIdLength: 256 };
    const parsed = parseBatch(JSON.parse(own!.body), { schema: readingSchema(limits), limits }, 1000);
    expect(parsed).toMatchObject({
      ok: true,
      readings: [
        { timeNs: '1767225600123456789', shipId: 'ship-a', cargoId: 'temp', value: -0 },
        { timeNs: '1767225600123456790', shipId: 'ship-b', cargoId: 'temp', value: 2.5e-7 },
      ],
    });
    expect(own!.body).toContain('"time":"2026-01-01T00:00:00.123456789Z"');
  });

  it("names a batch of the gateway's own readings by the site name they were answered under", async () => {
    const dataDir = tempDir('export-renamed');
    const before = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 16 * 1024 * 1024, site: 'pier-9' });
    await before.append('1767225600000000001\tship-a\ttemp\t1', 1, 1);
    before.close();
    const after = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 16 * 1024 * 1024, site: 'pier-10' });
    await after.append('1767225601000000001\tship-a\ttemp\t2', 1, 2);
    after.close();

    const out = join(tempDir('export-out'), 'readings.ndjson');
    exportQueue({ file: join(dataDir, 'queue.db'), out });
    expect(lines(out).map((l) => [l.site, l.readings])).toEqual([
      ['pier-9', 1],
      ['pier-10', 1],
    ]);
  });

  it('with --after, exports only what was queued after the last record of the earlier copy', async () => {
    const dataDir = tempDir('export-after');
    const queue = writer(dataDir);
    await queue.append('1767225600000000001\tship-a\told\t1', 1, 1);
    queue.close();
    const copy = tempDir('export-copy');
    for (const name of ['queue.db', 'queue.db-wal'])
      if (existsSync(join(dataDir, name))) copyFileSync(join(dataDir, name), join(copy, name));
    const again = writer(dataDir);
    await again.append('1767225602000000000\tship-a\tnew\t2', 1, 2);
    again.close();

    const out = join(tempDir('export-out'), 'readings.ndjson');
    const io = { out: '', err: '' };
    const status = queueCommand(['export', join(dataDir, 'queue.db'), '--after', join(copy, 'queue.db'), '--out', out], {
      out: (text) => (io.out += text),
      err: (text) => (io.err += text),
    });
    expect(io.err).toBe('');
    expect(status).toBe(0);
    expect(JSON.parse(io.out)).toMatchObject({ records: 1, readings: 1 });
    expect(lines(out).map((l) => l.body)).toEqual([
      '[{"time":"2026-01-01T00:00:02.000000000Z","ship_id":"ship-a","cargo_id":"new","value":2}]',
    ]);
  });

  it('refuses a file it cannot read and names what it needs', () => {
    const io = { out: '', err: '' };
    const output = { out: (text: string) => (io.out += text), err: (text: string) => (io.err += text) };
    expect(queueCommand(['export', join(tempDir('none'), 'queue.db'), '--out', '/nonexistent/x'], output)).toBe(1);
    expect(io.err).toMatch(/queue export: .*queue\.db/);
    expect(queueCommand(['export', 'queue.db'], output)).toBe(64);
    expect(io.err).toContain('needs a queue file and --out');
  });
});
