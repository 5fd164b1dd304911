import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { GATEWAY_NODE_OPTIONS } from '../scripts/lib/node-options.mjs';
import { spawnGateway } from './support/process.js';
import { tempDir } from './support/temp-dir.js';

const PRODUCTION_KEY = 'a-production-key-that-is-secret-0123';

describe('the start line says in words where everything is', () => {
  it('in the JSON log: API, fingerprint, queue, QuestDB and the public development key', async () => {
    const dataDir = join(tempDir('start-line'), 'data');
    const gw = await spawnGateway({ DATA_DIR: dataDir, QUESTDB_URL: inject('questdbUrl'), HEALTH_REPORT: 'false' });
    try {
      const started = gw.logs.find((line) => line.event === 'started')!;
      const fingerprint = (started.tls as { fingerprintSha256: string }).fingerprintSha256;
      const [port, httpsPort] = [started.address, started.httpsAddress].map((a) => String(a).split(':').pop());
      expect(started.msg).toBe(
        `Harbor Gateway ${started.version}: API http://127.0.0.1:${port}/api/v2/ingest and https://127.0.0.1:${httpsPort}/api/v2/ingest; ` +
          `HTTPS certificate SHA-256 ${fingerprint} (self-signed); queue ${join(dataDir, 'queue.db')} (0 readings queued); ` +
          `QuestDB ${inject('questdbUrl')}, table cargo_data; ` +
          'X-API-Key harbor-dev-key, the public development key (set API_KEY before other machines reach this one), ' +
          `device keys in ${join(dataDir, 'api-keys')}`,
      );
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  });

  it('on a terminal as a plain line, naming where a production key comes from but never the key', async () => {
    const dir = tempDir('start-line-tty');
    const keyFile = join(dir, 'api_key');
    writeFileSync(keyFile, PRODUCTION_KEY);
    const env = {
      PATH: process.env['PATH'] ?? '',
      NODE_OPTIONS: GATEWAY_NODE_OPTIONS,
      GATEWAY_ENV: 'production',
      API_KEY_FILE: keyFile,
      DATA_DIR: join(dir, 'data'),
      QUESTDB_URL: inject('questdbUrl'),
      HEALTH_REPORT: 'false',
      HOST: '0.0.0.0',
      PORT: '0',
      HTTPS_PORT: '0',
    };
    // script(1) gives the gateway a terminal, as `npm run local` in a shell does.
    const command = `echo "gateway pid $$"; exec ${process.execPath} ${inject('bundlePath')}`;
    const child = spawn('script', ['-qfec', command, '/dev/null'], { env, detached: true });
    let terminal = '';
    child.stdout.on('data', (chunk: Buffer) => (terminal += chunk.toString()));
    try {
      for (const deadline = Date.now() + 15_000; !/^Harbor Gateway .*\r?$/m.test(terminal) && Date.now() < deadline; )
        await new Promise((r) => setTimeout(r, 50));
      const line = /^(Harbor Gateway .*?)\r?$/m.exec(terminal)?.[1];
      expect(line, terminal).toBeDefined();
      expect(line).toMatch(/ on every address; HTTPS certificate SHA-256 ([0-9A-F]{2}:){31}[0-9A-F]{2} \(self-signed\); /);
      expect(line).toContain('X-API-Key from API_KEY (file)');
      expect(terminal).not.toContain(PRODUCTION_KEY);
    } finally {
      // The gateway runs in a session of its own under script(1): stop it by its pid.
      const pid = /gateway pid (\d+)/.exec(terminal)?.[1];
      if (pid === undefined) process.kill(-child.pid!, 'SIGKILL');
      else process.kill(Number(pid), 'SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  });
});
