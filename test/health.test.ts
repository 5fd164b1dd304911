import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { TEST_KEY, startTestGateway } from './support/gateway.js';
import { spawnGateway } from './support/process.js';
import { sql, waitForCount } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

describe('health report', () => {
  it('writes queue depth, oldest age and flush errors to gateway_health', async () => {
    const name = `gw-${process.pid}-${Date.now()}`;
    const gw = await startTestGateway({ HEALTH_REPORT: 'true', HOUSEKEEPING_CRON: '* * * * * *', GATEWAY_NAME: name });
    try {
      expect((await gw.post('/api/v2/ingest/', { ship_id: 's', cargo_id: 'c', value: 1 })).status).toBe(200);
      const where = `FROM gateway_health WHERE gateway = '${name}' AND accepted_readings >= 1`;
      expect(await waitForCount(`SELECT count() ${where}`, 1, 10_000)).toBeGreaterThanOrEqual(1);
      const [row] = (
        await sql<[boolean, number, number, number]>(`SELECT ready, queue_readings, dead_letters, flush_failures ${where} LIMIT 1`)
      ).dataset;
      expect(row).toEqual([true, expect.any(Number), 0, 0]);
    } finally {
      await gw.stop();
    }
  });
});

describe('systemd notification', () => {
  it('reports ready, feeds the watchdog while healthy and says when it stops', async () => {
    const socketPath = join(tempDir('notify'), 'notify.sock');
    const receiver = spawn('python3', [join(import.meta.dirname, 'support', 'notify-socket.py'), socketPath], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let received = '';
    receiver.stdout.on('data', (chunk: Buffer) => (received += chunk.toString()));
    try {
      while (!received.includes('listening')) await new Promise((r) => setTimeout(r, 20));
      const gw = await spawnGateway({
        API_KEY: TEST_KEY,
        DATA_DIR: tempDir('notify-data'),
        QUESTDB_URL: inject('questdbUrl'),
        NOTIFY_SOCKET: socketPath,
        WATCHDOG_USEC: '200000',
      });
      await new Promise((r) => setTimeout(r, 700));
      gw.child.kill('SIGTERM');
      expect((await gw.exited).code).toBe(0);
      const messages = received.split('\n');
      expect(messages.some((m) => m.startsWith('READY=1 STATUS=listening on 127.0.0.1:'))).toBe(true);
      expect(messages.filter((m) => m.startsWith('WATCHDOG=1')).length).toBeGreaterThanOrEqual(3);
      expect(messages.some((m) => m.includes('STOPPING=1'))).toBe(true);
    } finally {
      receiver.kill();
    }
  });
});
