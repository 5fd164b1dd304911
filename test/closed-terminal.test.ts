import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, inject, it } from 'vitest';
import { GATEWAY_NODE_OPTIONS } from '../scripts/lib/node-options.mjs';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

/** Running, and not a zombie its new parent has yet to reap. */
const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

it('stops on SIGTERM after the terminal it logs to has closed', async () => {
  const env = {
    PATH: process.env['PATH'] ?? '',
    NODE_OPTIONS: GATEWAY_NODE_OPTIONS,
    DATA_DIR: join(tempDir('closed-terminal'), 'data'),
    QUESTDB_URL: inject('questdbUrl'),
    HEALTH_REPORT: 'false',
    HOST: '127.0.0.1',
    PORT: '0',
    HTTPS_PORT: '0',
  };
  // script(1) gives the gateway a terminal; killing script closes it, as closing a terminal window does.
  const command = `echo "gateway pid $$"; exec ${process.execPath} ${inject('bundlePath')}`;
  const terminal = spawn('script', ['-qfec', command, '/dev/null'], { env, detached: true });
  let output = '';
  terminal.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await waitUntil('the gateway to start', () => output.includes('"event":"started"'), 15_000);
  const pid = Number(/gateway pid (\d+)/.exec(output)![1]);
  terminal.kill('SIGKILL');
  await new Promise((resolve) => terminal.once('exit', resolve));
  // The hangup reads as a reload; every line logged from now on meets a closed terminal.
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(alive(pid)).toBe(true);
  process.kill(pid, 'SIGTERM');
  try {
    await waitUntil('the gateway to exit', () => !alive(pid), 15_000);
  } finally {
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
});
