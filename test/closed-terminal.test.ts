import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { tempDir } from './support/temp-dir.js';
import { startOnTerminal } from './support/terminal-gateway.js';
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
  const { terminal, pid } = await startOnTerminal({ DATA_DIR: join(tempDir('closed-terminal'), 'data') });
  // Killing script(1) closes the terminal, as closing a terminal window does.
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
