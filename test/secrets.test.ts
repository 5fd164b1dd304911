import { describe, expect, inject, it } from 'vitest';
import { spawnGateway } from './support/process.js';
import { tempDir } from './support/temp-dir.js';
import { waitForCount } from './support/questdb-sql.js';

describe('secrets', () => {
  it('never appear in logs, error bodies or the status endpoint, even at trace level', async () => {
    const apiKey = 'k3y-that-must-never-leak-0123';
    const password = 'pa55word-that-must-never-leak';
    const gatewayName = `secrets-${process.pid}`;
    const gw = await spawnGateway({
      API_KEY: apiKey,
      QUESTDB_USERNAME: 'admin',
      QUESTDB_PASSWORD: password,
      DATA_DIR: tempDir('secrets'),
      QUESTDB_URL: inject('questdbUrl'),
      LOG_LEVEL: 'trace',
      FLUSH_INTERVAL_MS: '50',
      HEALTH_REPORT: 'true',
      HOUSEKEEPING_CRON: '* * * * * *',
      GATEWAY_NAME: gatewayName,
    });
    const bodies: string[] = [];
    const send = async (path: string, key: string | undefined, body: string) => {
      const response = await fetch(`${gw.url}${path}`, { method: 'POST', headers: key === undefined ? {} : { 'x-api-key': key }, body });
      bodies.push(await response.text());
    };
    await send('/api/v2/ingest', apiKey, '{"ship_id":"s","cargo_id":"c","value":1}');
    await send('/api/v2/ingest', `${apiKey}x`, '{"ship_id":"s","cargo_id":"c","value":1}');
    await send('/api/v2/ingest', apiKey.slice(0, -1), '{}');
    await send('/api/v2/ingest', undefined, '{}');
    await send('/api/v2/ingest/batch', apiKey, `[{"ship_id":"${apiKey}","cargo_id":"c","value":"x"}]`.replace(apiKey, 'not-the-key'));
    bodies.push(await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': apiKey } })).text());
    // Housekeeping has run with the credentials: its health row is in QuestDB.
    expect(await waitForCount(`SELECT count() FROM gateway_health WHERE gateway = '${gatewayName}'`, 1)).toBeGreaterThanOrEqual(1);
    gw.child.kill('SIGTERM');
    await gw.exited;

    const everything = `${JSON.stringify(gw.logs)}\n${bodies.join('\n')}`;
    expect(gw.logs.length).toBeGreaterThan(3);
    expect(everything).not.toContain(apiKey);
    expect(everything).not.toContain(password);
    expect(everything).not.toContain(Buffer.from(`admin:${password}`).toString('base64'));
  });
});
