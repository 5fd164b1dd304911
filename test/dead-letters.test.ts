import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { QueueWriter } from '../src/queue/queue-writer.js';
import { TEST_KEY, startTestGateway } from './support/gateway.js';
import { sql, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

const run = promisify(execFile);
const cli = async (...args: string[]) => (await run(process.execPath, [inject('bundlePath'), 'dead-letters', ...args])).stdout;

// 2^63 and more: valid text for the queue, refused by QuestDB ("Could not parse timestamp").
const POISON = '9999999999999999999\tpoison-ship\tc\t1';

describe('poison rows', () => {
  it('are dead-lettered with the reason while the rest flows, and the CLI lists, re-queues and purges them', async () => {
    const dataDir = tempDir('poison');
    const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 1 << 20 });
    const times = (from: number, count: number) =>
      Array.from({ length: count }, (_, i) => `${1790000000000000000n + BigInt(from + i)}\tgood-ship\tc\t${from + i}`);
    await queue.append(times(0, 10).join('\n'), 10, Date.now());
    await queue.append([...times(10, 5), POISON, ...times(15, 5)].join('\n'), 11, Date.now());
    await queue.append(times(20, 10).join('\n'), 10, Date.now());
    queue.close();

    const gw = await startTestGateway({ DATA_DIR: dataDir, HOUSEKEEPING_CRON: '* * * * * *' });
    try {
      await waitForDrained(gw);
      await waitForWalApplied(gw.table);
      expect((await sql<[number]>(`SELECT count() FROM "${gw.table}" WHERE ship_id = 'good-ship'`)).dataset[0]![0]).toBe(30);
      expect(gw.gateway.queue.deadLetterCount()).toBe(1);
      const status = (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
        deadLetters: number;
        totals: { deadLettered: number };
      };
      expect(status).toMatchObject({ deadLetters: 1, totals: { deadLettered: 1 } });

      const listed = JSON.parse(await cli('list', '--json', '--data-dir', dataDir)) as { id: number; reason: string; line: string }[];
      expect(listed).toHaveLength(1);
      expect(listed[0]!.reason).toMatch(/Could not parse timestamp/);
      expect(listed[0]!.line).toBe(POISON);
      expect(await cli('list', '--data-dir', dataDir)).toMatch(/^1 dead letter\(s\)\n#\d+ questdb failed .*: .*Could not parse timestamp/);

      expect(await cli('requeue', '--sink', 'upstream', '--all', '--data-dir', dataDir)).toMatch(/^re-queued 0 dead letter\(s\);/);
      expect(await cli('requeue', String(listed[0]!.id), '--data-dir', dataDir)).toMatch(/^re-queued 1 dead letter\(s\) \(1 to questdb\)/);
      // The running gateway notices the re-queued reading, sends it, and QuestDB refuses it again:
      // a dead letter once more, under a new id, and still one refusal in the sink's count.
      const deadline = Date.now() + 10_000;
      let again: { id: number }[] = [];
      while (Date.now() < deadline) {
        again = JSON.parse(await cli('list', '--json', '--data-dir', dataDir)) as { id: number }[];
        if (again.length === 1 && again[0]!.id !== listed[0]!.id) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(again.map((d) => d.id)).not.toContain(listed[0]!.id);
      expect(again).toHaveLength(1);
      expect(gw.gateway.queue.stats().readings).toBe(0);
      expect(gw.gateway.stats.deadLettered).toBe(1);

      expect(await cli('purge', '--all', '--data-dir', dataDir)).toMatch(/purged 1/);
      expect(gw.gateway.queue.deadLetterCount()).toBe(0);
    } finally {
      await gw.stop();
    }
  });

  it('the CLI refuses ambiguous or unknown arguments', async () => {
    const dataDir = tempDir('poison-cli');
    await expect(run(process.execPath, [inject('bundlePath'), 'dead-letters', 'purge', '--data-dir', dataDir])).rejects.toMatchObject({
      code: 64,
    });
    await expect(run(process.execPath, [inject('bundlePath'), 'dead-letters', 'list', '--data-dir', dataDir])).rejects.toMatchObject({
      code: 66,
    });
    await expect(run(process.execPath, [inject('bundlePath'), 'dead-letters', 'list', '--bogus'])).rejects.toMatchObject({ code: 64 });
  });
});
