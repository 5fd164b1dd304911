import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from './support/temp-dir.js';

const script = join(import.meta.dirname, '..', 'scripts', 'questdb.mjs');

/** Runs `node scripts/questdb.mjs start …` until it exits, or stops it after `timeoutMs`. */
function start(args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [script, 'start', '--data-dir', tempDir('questdb-script'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

describe('node scripts/questdb.mjs start', () => {
  it('fails and says so when another process already serves the HTTP port', async () => {
    // An impostor that answers every request, QuestDB's readiness check included.
    const impostor = createServer((_, response) => response.end('{}'));
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    const port = (impostor.address() as AddressInfo).port;
    try {
      const result = await start(['--http-port', String(port)], 60_000);
      expect(result.stdout).not.toMatch(/QuestDB .*: HTTP/);
      expect(result.stderr).toContain(`port ${port} (HTTP) is already in use by another process`);
      expect(result.code).toBe(1);
    } finally {
      impostor.close();
    }
  });
});
