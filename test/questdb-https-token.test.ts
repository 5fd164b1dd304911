// The QuestDB client over HTTPS with a bearer token, as QuestDB Enterprise serves ILP/HTTP.
// Open-source QuestDB has neither TLS nor tokens, so a TLS-terminating proxy that demands the
// token stands in front of the suite's real QuestDB: what it lets through is written for real.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { QuestDbError, QuestDbHttp, type QuestDbOptions } from '../src/questdb/questdb-http.js';
import { createSelfSignedCertificate } from '../src/tls/self-signed.js';
import { sql, uniqueTable, waitForCount } from './support/questdb-sql.js';
import { TlsTokenProxy } from './support/tls-proxy.js';

const TOKEN = 'test-token-0123456789abcdef';

describe('QuestDB over HTTPS with a bearer token', () => {
  let proxy: TlsTokenProxy;
  const clients: QuestDbHttp[] = [];
  const client = (options: Partial<QuestDbOptions>): QuestDbHttp => {
    const made = new QuestDbHttp({ url: proxy.url, timeoutMs: 10_000, username: undefined, password: undefined, ...options });
    clients.push(made);
    return made;
  };

  beforeAll(async () => {
    proxy = await TlsTokenProxy.start(inject('questdbUrl'), TOKEN);
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await proxy.close();
  });

  it('writes over HTTPS with the token and a CA file, and the rows arrive', async () => {
    const table = uniqueTable('https');
    // The suite's QuestDB creates no table over ILP, as every QuestDB the project runs.
    await sql(`CREATE TABLE '${table}' (ship_id SYMBOL, value DOUBLE, timestamp TIMESTAMP) TIMESTAMP(timestamp) PARTITION BY DAY WAL`);
    const questdb = client({ token: TOKEN, ca: proxy.caPem });
    const outcome = await questdb.write(
      Buffer.from(`${table},ship_id=s1 value=1.5 1700000000000000000\n${table},ship_id=s2 value=2.5 1700000000000000000\n`),
    );
    expect(outcome).toEqual({ ok: true });
    expect(await waitForCount(`SELECT count() FROM '${table}'`, 2)).toBe(2);
    expect(await questdb.exec<{ dataset: unknown[][] }>(`SELECT count() FROM '${table}'`)).toMatchObject({ dataset: [[2]] });
    expect(proxy.forwarded.get('/write')).toBeGreaterThanOrEqual(1);
  });

  it('reports a wrong token as refused credentials, an error for the operator, for writes and SQL', async () => {
    const table = uniqueTable('https_wrong');
    const questdb = client({ token: 'not-the-token', ca: proxy.caPem });
    const outcome = await questdb.write(Buffer.from(`${table},ship_id=s1 value=1 1700000000000000000\n`));
    expect(outcome).toMatchObject({ ok: false, kind: 'failed', level: 'error' });
    expect(outcome.ok ? '' : outcome.message).toMatch(/refused the credentials \(401\)/);
    expect(outcome.ok ? '' : outcome.message).not.toContain('not-the-token');
    const refused = await questdb.exec('SELECT 1').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(QuestDbError);
    expect(refused).toMatchObject({ level: 'error', message: expect.stringMatching(/401/) });
    const tables = await sql(`SELECT count() FROM tables() WHERE table_name = '${table}'`);
    expect(tables.dataset).toEqual([[0]]);
  });

  it('sends no request without a token: the missing one is refused too', async () => {
    const outcome = await client({ ca: proxy.caPem }).write(Buffer.from('x value=1 1700000000000000000\n'));
    expect(outcome).toMatchObject({ ok: false, level: 'error', message: expect.stringMatching(/401/) });
  });

  it('refuses a server whose certificate chains to an authority it does not trust', async () => {
    // Node's own list of authorities does not know the proxy's certificate; nor does another CA file.
    const other = createSelfSignedCertificate({ commonName: 'another-ca', altNames: ['127.0.0.1'], validDays: 2 }).cert;
    for (const ca of [undefined, other]) {
      const before = proxy.forwarded.get('/write') ?? 0;
      const outcome = await client({ token: TOKEN, ca }).write(Buffer.from('x value=1 1700000000000000000\n'));
      expect(outcome).toMatchObject({
        ok: false,
        kind: 'failed',
        level: 'error',
        message: expect.stringMatching(/TLS certificate was refused/),
      });
      expect(proxy.forwarded.get('/write') ?? 0).toBe(before);
    }
  });

  it('passes on a 503 with Retry-After as a passing failure with its pause', async () => {
    proxy.busy = { retryAfterSeconds: 7 };
    try {
      const outcome = await client({ token: TOKEN, ca: proxy.caPem }).write(Buffer.from('x value=1 1700000000000000000\n'));
      expect(outcome).toMatchObject({ ok: false, kind: 'failed', level: 'warn', retryAfterMs: 7000 });
    } finally {
      proxy.busy = undefined;
    }
  });
});
