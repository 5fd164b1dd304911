import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createPowercutDisk } from '../scripts/lib/powercut-fs.mjs';
import { EXIT_QUEUE_SYNC_LOST } from '../src/gateway.js';
import { QueueWriter } from '../src/queue/queue-writer.js';
import { TEST_KEY } from './support/gateway.js';
import { killAll, spawnGateway, type GatewayProcess } from './support/process.js';

// In power-loss mode ingest syncs its commits' log itself, off the event loop, and answers a
// request only after that sync (src/queue/log-sync.ts). When the disk fails it, the gateway must
// answer nothing more and exit without closing the queue file, and the next start must keep every
// reading answered before, through a power cut.

type Disk = Awaited<ReturnType<typeof createPowercutDisk>>;
let disk: Disk | undefined;
const running: GatewayProcess[] = [];

afterEach(async () => {
  await killAll(running.splice(0));
  await disk?.remove();
  disk = undefined;
});

const DATA_DIR = join('site', 'data');

async function start(dataDir: string): Promise<GatewayProcess> {
  const gateway = await spawnGateway({
    API_KEY: TEST_KEY,
    DATA_DIR: dataDir,
    DURABILITY: 'power-loss',
    // Nothing listens there: no sink commits beside ingest's, so the failing fsync is ingest's own.
    QUESTDB_URL: 'http://127.0.0.1:9',
    QUESTDB_TABLE: 'readings',
    HEALTH_REPORT: 'false',
  });
  running.push(gateway);
  return gateway;
}

const post = (gateway: GatewayProcess, value: number): Promise<number | string> =>
  fetch(`${gateway.url}/api/v2/ingest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY },
    body: JSON.stringify({ time: new Date(1_780_000_000_000 + value).toISOString(), ship_id: 'ship', cargo_id: 'cargo', value }),
  }).then(
    (response) => response.status,
    (error: Error) => `no answer (${(error.cause as Error | undefined)?.message ?? error.message})`,
  );

async function valuesAfterACut(d: Disk, fs: Awaited<ReturnType<Disk['mount']>>): Promise<number[]> {
  await fs.cut();
  await killAll(running.splice(0));
  await fs.unmount();
  const again = await d.mount();
  const queue = QueueWriter.open({ dataDir: join(again.mountPoint, DATA_DIR), durability: 'power-loss', maxBytes: 1 << 20 });
  queue.close();
  await again.unmount();
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(join(d.backing, DATA_DIR, 'queue.db'), { readonly: true });
  try {
    const payloads = db.prepare('SELECT payload FROM segment_1 ORDER BY id').pluck().all() as string[];
    return payloads.flatMap((payload) => payload.split('\n')).map((line) => Number(line.split('\t')[3]));
  } finally {
    db.close();
  }
}

describe('a gateway whose log sync fails', () => {
  it('answers no request after it, exits without closing the queue, and the next start keeps every answered reading through a power cut', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    const dataDir = join(fs.mountPoint, DATA_DIR);
    const first = await start(dataDir);
    expect(await post(first, 1)).toBe(200);

    await fs.failFsyncs('file');
    const refused = await post(first, 2);
    expect(refused).not.toBe(200);
    expect((await first.exited).code).toBe(EXIT_QUEUE_SYNC_LOST);
    expect(first.logs.filter((line) => line['event'] === 'queue_sync_lost')).toHaveLength(1);

    const second = await start(dataDir);
    expect(await post(second, 3)).toBe(200);
    // Reading 2 may stay (it was never answered 2xx); 1 and 3 must.
    expect((await valuesAfterACut(disk, fs)).filter((value) => value !== 2)).toEqual([1, 3]);
  });
});
