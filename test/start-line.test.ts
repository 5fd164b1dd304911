import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { spawnGateway } from './support/process.js';
import { tempDir } from './support/temp-dir.js';
import { startOnTerminal } from './support/terminal-gateway.js';

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

  it('on a terminal as a plain line with its time, not a JSON record, naming where a production key comes from but never the key', async () => {
    const dir = tempDir('start-line-tty');
    const keyFile = join(dir, 'api_key');
    writeFileSync(keyFile, PRODUCTION_KEY);
    const gateway = await startOnTerminal({
      GATEWAY_ENV: 'production',
      API_KEY_FILE: keyFile,
      DATA_DIR: join(dir, 'data'),
      HOST: '0.0.0.0',
    });
    try {
      const line = /^\d\d:\d\d:\d\d (Harbor Gateway .*?)\r?$/m.exec(gateway.output())?.[1];
      expect(line, gateway.output()).toBeDefined();
      // The line once, as the README shows it: the terminal shows no JSON record around it.
      expect(gateway.output().split('Harbor Gateway ').length - 1).toBe(1);
      expect(gateway.output()).not.toMatch(/^\{"level"/m);
      expect(line).toMatch(/ on every address; HTTPS certificate SHA-256 ([0-9A-F]{2}:){31}[0-9A-F]{2} \(self-signed\); /);
      expect(line).toContain('X-API-Key from API_KEY (file)');
      expect(gateway.output()).not.toContain(PRODUCTION_KEY);
    } finally {
      process.kill(gateway.pid, 'SIGTERM');
      await new Promise((resolve) => gateway.terminal.once('exit', resolve));
    }
  });
});
