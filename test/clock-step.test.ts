import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFailed } from 'vitest';
import { aptInstall } from '../scripts/lib/apt.mjs';
import { TEST_KEY } from './support/gateway.js';
import { gatewayEnv, spawnGateway } from './support/process.js';
import { sql, waitForCount } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

/**
 * The gateway as its own process with its wall clock stepped as NTP steps it: libfaketime (Debian's
 * libfaketime) moves what gettimeofday and clock_gettime(CLOCK_REALTIME) answer by the offset in a
 * file, read at every call; the monotonic clock stays real (DONT_FAKE_MONOTONIC), as in a real step.
 */
const MULTIARCH: Record<string, string> = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

function faketime(): { env: Record<string, string>; step: (offset: string) => void } {
  const library = `/usr/lib/${MULTIARCH[process.arch]}/faketime/libfaketimeMT.so.1`;
  aptInstall(['libfaketime'], library);
  const file = join(tempDir('faketime'), 'offset');
  writeFileSync(file, '+0\n');
  return {
    env: { LD_PRELOAD: library, FAKETIME_TIMESTAMP_FILE: file, FAKETIME_NO_CACHE: '1', DONT_FAKE_MONOTONIC: '1' },
    step: (offset) => writeFileSync(file, `${offset}\n`),
  };
}

const REPLAY_WINDOW_MS = 15_000;

describe('a gateway whose clock is stepped', () => {
  it('gives readings without a time distinct receive times across a step back, and keeps its replay window across a step forward', async () => {
    const clock = faketime();
    const env = gatewayEnv('clockstep', { ...clock.env, FLUSH_INTERVAL_MS: '50', REPLAY_WINDOW_MS: String(REPLAY_WINDOW_MS) });
    const [table, dataDir] = [env.QUESTDB_TABLE, env.DATA_DIR];
    const gateway = await spawnGateway(env);
    // What the gateway did, for a failure that a rerun does not show again.
    onTestFailed(() => {
      const lines = gateway.logs.slice(-60);
      console.error(`the gateway's last log lines:\n${lines.map((l) => JSON.stringify(l)).join('\n')}\n${gateway.stderr()}`);
    });
    let sent = 0;
    /** One time-less reading a request, as fast as they are answered, for `ms`. */
    const pushFor = async (ms: number) => {
      const until = Date.now() + ms;
      while (Date.now() < until) {
        const response = await fetch(`${gateway.url}/api/v2/ingest/`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY },
          body: JSON.stringify({ ship_id: 'clockless', cargo_id: 'temp', value: sent }),
        });
        expect(response.status).toBe(200);
        sent += 1;
      }
    };
    const marks = () => {
      const db = new Database(join(dataDir, 'queue.db'), { readonly: true });
      try {
        const mark = (tableName: string) =>
          db.prepare<[], [number, number]>(`SELECT segment, last_id FROM ${tableName} WHERE name = 'questdb'`).raw(true).get()!;
        // The queue's newest record: the last delivery's mark once the queue file has recorded it.
        const segments = db
          .prepare<[], [string]>("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'segment\\_%' ESCAPE '\\'")
          .raw(true)
          .all()
          .map(([name]) => Number(name.slice('segment_'.length)))
          .sort((a, b) => b - a);
        const newest = segments
          .map((segment) => [segment, db.prepare<[], [number | null]>(`SELECT max(id) FROM segment_${segment}`).raw(true).get()![0]])
          .find(([, id]) => id !== null);
        return { kept: mark('sink_kept'), progress: mark('sink_progress'), newest };
      } finally {
        db.close();
      }
    };
    try {
      // Three seconds of requests, then NTP steps the clock back three seconds: the same
      // milliseconds come round again, and each request lands on one already used about as often.
      await pushFor(3_000);
      clock.step('-3');
      await pushFor(3_000);
      expect(await waitForCount(`SELECT count() FROM "${table}"`, sent)).toBe(sent);
      const distinct = await sql<[number]>(`SELECT count() FROM (SELECT DISTINCT time FROM "${table}")`);
      expect(distinct.dataset[0]![0]).toBe(sent);
      expect(gateway.logs.some((l) => l['event'] === 'receive_clock_stepped_back')).toBe(true);

      // Everything delivered and acknowledged just now; then NTP steps the clock a day forward.
      await pushFor(50);
      // QuestDB may show the rows before the gateway has recorded their delivery: the mark must be
      // the newest record's, or the kept mark later reaches a mark this test never saw.
      await waitUntil('the last reading delivered', async () => {
        const { progress, newest } = marks();
        return (await sql<[number]>(`SELECT count() FROM "${table}"`)).dataset[0]![0] === sent && progress.join() === newest?.join();
      });
      const delivered = marks().progress;
      clock.step('+1d');
      // The sink checks its table 5 s after the delivery, then when what it acknowledged is a whole
      // window old (by the monotonic clock), and lets it go.
      await new Promise((resolve) => setTimeout(resolve, 6_500));
      expect(marks().kept).not.toEqual(delivered);
      await waitUntil('the kept readings let go once the window passed', () => marks().kept.join() === delivered.join(), 45_000);
    } finally {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
  }, 120_000);
});
