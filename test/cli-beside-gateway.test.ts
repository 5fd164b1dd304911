import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { QueueWriter } from '../src/queue/queue-writer.js';
import { TEST_KEY, startTestGateway } from './support/gateway.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const run = promisify(execFile);
const cli = (args: string[], env: Record<string, string> = {}) =>
  run(process.execPath, [inject('bundlePath'), ...args], { env: { PATH: process.env['PATH'] ?? '', ...env } });

// 2^63 and more: valid text for the queue, refused by QuestDB, so it comes back as a dead letter.
const POISON = '9999999999999999999\tpoison-ship\tc\t1';

/**
 * The CLI commands that write, with a gateway running on the same DATA_DIR: dead letters change
 * through SQLite's locking (the gateway keeps committing meanwhile), the key file is replaced whole,
 * and the certificate is only read, never made a second time.
 */
describe('CLI commands beside a running gateway', () => {
  it('re-queue and purge dead letters while ingest commits without pause, every command succeeding', async () => {
    const dataDir = tempDir('cli-beside');
    const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 1 << 30 });
    await queue.append(POISON, 1, Date.now());
    queue.close();
    const gw = await startTestGateway({ DATA_DIR: dataDir, FLUSH_INTERVAL_MS: '20' });
    let loading = true;
    let accepted = 0;
    const load = (async () => {
      for (let n = 0; loading; n++) {
        const batch = Array.from({ length: 20 }, (_, i) => ({ ship_id: 'load', cargo_id: `c${i}`, value: n }));
        if ((await gw.post('/api/v2/ingest/batch', batch)).status === 200) accepted += batch.length;
      }
    })();
    try {
      await waitUntil('the poison reading is a dead letter', () => gw.gateway.queue.deadLetterCount() === 1);
      for (let round = 0; round < 5; round++) {
        const requeued = await cli(['dead-letters', 'requeue', '--all', '--data-dir', dataDir]);
        expect(requeued.stdout).toMatch(/^re-queued 1 dead letter/);
        await waitUntil('refused again', () => gw.gateway.queue.deadLetterCount() === 1);
      }
      expect((await cli(['dead-letters', 'purge', '--all', '--data-dir', dataDir])).stdout).toMatch(/^purged 1 dead letter/);
      expect(gw.gateway.queue.deadLetterCount()).toBe(0);
    } finally {
      loading = false;
      await load;
      await gw.stop();
    }
    expect(accepted).toBeGreaterThan(0);
  }, 120_000);

  it('adds keys from many commands at once without losing one', async () => {
    const dataDir = tempDir('cli-keys');
    const names = Array.from({ length: 8 }, (_, i) => `device-${i}`);
    await Promise.all(names.map((name) => cli(['keys', 'add', name], { DATA_DIR: dataDir })));
    const listed = (await cli(['keys', 'list'], { DATA_DIR: dataDir })).stdout;
    expect(
      listed
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => line.split('\t')[0]),
    ).toEqual(expect.arrayContaining(names));
    expect(listed.trim().split('\n')).toHaveLength(names.length);
  }, 60_000);

  it('prints the certificate the running gateway serves and never makes a second one', async () => {
    const gw = await startTestGateway();
    try {
      const status = (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
        tls: { fingerprintSha256: string };
      };
      const printed = await cli(['tls-certificate', '--fingerprint'], { DATA_DIR: gw.dataDir });
      expect(printed.stdout.trim()).toBe(status.tls.fingerprintSha256);
      // The gateway serves its pair from memory; with the files gone, a second pair made now would
      // be one it does not serve.
      rmSync(join(gw.dataDir, 'tls'), { recursive: true });
      await expect(cli(['tls-certificate'], { DATA_DIR: gw.dataDir })).rejects.toMatchObject({
        stderr: expect.stringMatching(/no self-signed certificate in .* yet/),
      });
      expect(existsSync(join(gw.dataDir, 'tls'))).toBe(false);
    } finally {
      await gw.stop();
    }
    // With no gateway, the command makes the pair (owning DATA_DIR meanwhile) and the next gateway serves it.
    const made = (await cli(['tls-certificate', '--fingerprint'], { DATA_DIR: gw.dataDir })).stdout.trim();
    expect(readFileSync(join(gw.dataDir, 'tls', 'cert.pem'), 'utf8')).toMatch(/BEGIN CERTIFICATE/);
    const next = await startTestGateway({ DATA_DIR: gw.dataDir });
    try {
      const status = (await (await fetch(`${next.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
        tls: { fingerprintSha256: string };
      };
      expect(status.tls.fingerprintSha256).toBe(made);
    } finally {
      await next.stop();
    }
  }, 60_000);
});
