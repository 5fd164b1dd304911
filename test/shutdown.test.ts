import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { GATEWAY_NODE_OPTIONS } from '../scripts/lib/node-options.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { TEST_KEY } from './support/gateway.js';
import { gatewayEnv, spawnGateway } from './support/process.js';
import { sql, waitForWalApplied } from './support/questdb-sql.js';
import { QueueWriter } from '../src/queue/queue-writer.js';

const post = (url: string, body: unknown) =>
  fetch(`${url}/api/v2/ingest/batch`, { method: 'POST', headers: { 'x-api-key': TEST_KEY }, body: JSON.stringify(body) });

describe('graceful shutdown', () => {
  it('on SIGTERM finishes in-flight requests, flushes and exits 0', async () => {
    const env = gatewayEnv('shutdown', { FLUSH_INTERVAL_MS: '60000' });
    const table = env.QUESTDB_TABLE;
    const gw = await spawnGateway(env);
    let accepted = 0;
    const outcomes: string[] = [];
    let firstAnswer: () => void = () => undefined;
    const answered = new Promise<void>((resolve) => (firstAnswer = resolve));
    const requests = Array.from({ length: 40 }, async (_, i) => {
      try {
        const response = await post(gw.url, [
          { time: `2026-06-01T00:00:00.${String(i).padStart(3, '0')}Z`, ship_id: 's', cargo_id: 'c', value: i },
        ]);
        outcomes.push(String(response.status));
        if (response.status === 200) accepted += 1;
      } catch {
        outcomes.push('refused connection');
      }
      firstAnswer();
    });
    // SIGTERM while the rest are in flight, however slow the machine is.
    await answered;
    gw.child.kill('SIGTERM');
    await Promise.all(requests);
    expect(await gw.exited).toEqual({ code: 0, signal: null });
    expect(accepted).toBeGreaterThan(0);
    expect(outcomes.every((o) => o === '200' || o === '503' || o === 'refused connection')).toBe(true);
    const events = gw.logs.map((l) => l['event']);
    expect(events).toEqual(expect.arrayContaining(['signal', 'stopping', 'delivered', 'stopped']));
    await waitForWalApplied(table);
    expect((await sql<[number]>(`SELECT count() FROM "${table}"`)).dataset[0]![0]).toBe(accepted);
  });

  it('on SIGTERM during its start, starts, then stops in order: exit 0, its queue closed', async () => {
    const env = gatewayEnv('shutdown-start');
    const child = spawn(process.execPath, [inject('bundlePath')], {
      env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: GATEWAY_NODE_OPTIONS, HOST: '127.0.0.1', PORT: '0', HTTPS_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    // The first log line comes early in the start, well before the gateway listens.
    child.stdout.on('data', (chunk: Buffer) => {
      if (output === '') child.kill('SIGTERM');
      output += chunk.toString();
    });
    const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    expect({ code, signal }, output).toEqual({ code: 0, signal: null });
    expect(output).toContain('"event":"started"');
    expect(output).toContain('"event":"stopped"');
    // SQLite removes the WAL file when the queue is closed in order.
    expect(existsSync(join(env.DATA_DIR, 'queue.db-wal'))).toBe(false);
  });

  it('gives up the last flush at the deadline when QuestDB is away, keeping the queue', async () => {
    const env = gatewayEnv('shutdown', { QUESTDB_URL: `http://127.0.0.1:${await freePort()}`, SHUTDOWN_TIMEOUT_MS: '1000' });
    const dataDir = env.DATA_DIR;
    const gw = await spawnGateway(env);
    expect((await post(gw.url, [{ ship_id: 's', cargo_id: 'c', value: 1 }])).status).toBe(200);
    const started = Date.now();
    gw.child.kill('SIGTERM');
    expect((await gw.exited).code).toBe(0);
    expect(Date.now() - started).toBeLessThan(5000);
    const queue = QueueWriter.open({ dataDir, durability: 'power-loss', maxBytes: 1 << 20 });
    expect(queue.stats().readings).toBe(1);
    queue.close();
  });
});
