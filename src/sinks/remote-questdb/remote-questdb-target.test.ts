import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/config.js';
import { QuestDbError, type QuestDbClient, type WriteOutcome } from '../../questdb/questdb-http.js';
import type { QueueRecord } from '../../queue/queue-reader.js';
import { tempDir } from '../../../test/support/temp-dir.js';
import { QuestDbTarget } from '../questdb/questdb-target.js';
import { sinkSpecs } from '../sink-specs.js';
import { remoteQuestDbSpec } from './remote-questdb-spec.js';

// The remote QuestDB sink is the QuestDB target with another client: what it makes of the remote
// server's answers, and the spec the configuration turns into, against a stand-in for QuestDB.

/** A QuestDB whose table is fine, whose writes answer `answer`, and that keeps every SQL statement. */
class StandIn implements QuestDbClient {
  readonly statements: string[] = [];
  answer: WriteOutcome = { ok: true };
  refuseSql: QuestDbError | undefined;

  async write(): Promise<WriteOutcome> {
    return this.answer;
  }

  async exec<T>(sql: string): Promise<T> {
    if (this.refuseSql !== undefined) throw this.refuseSql;
    this.statements.push(sql);
    if (sql.includes('FROM tables()')) return { dataset: [[1, true, false, 0, 'HOUR']] } as T;
    if (sql.includes('table_columns')) {
      return {
        dataset: [
          ['time', 'TIMESTAMP_NS', true],
          ['ship_id', 'SYMBOL', false],
          ['cargo_id', 'SYMBOL', false],
          ['value', 'DOUBLE', false],
          ['site', 'SYMBOL', false],
        ],
      } as T;
    }
    return {} as T;
  }

  async close(): Promise<void> {}
  async reconnect(): Promise<void> {}
}

const RECORDS: QueueRecord[] = [{ segment: 1, id: 1, receivedMs: 0, readings: 1, bytes: 20, payload: '1700000000000000000\ts\tc\t1.5' }];
const target = (questdb: StandIn) =>
  new QuestDbTarget({
    questdb,
    logger: pino({ level: 'silent' }),
    options: {
      name: 'remote-questdb',
      describe: 'https://q.example.com',
      table: 'cargo_data',
      retentionDays: undefined,
      site: 'site-a',
      resumesWal: false,
    },
  });

describe('the remote QuestDB target', () => {
  it('leaves the central table TTL alone, and keeps its deduplication', async () => {
    const questdb = new StandIn();
    const sink = target(questdb);
    expect(await sink.ready()).toEqual({ ok: true });
    expect(await sink.deliver(RECORDS)).toEqual({ ok: true, requests: 1, deadLetters: [] });
    expect(questdb.statements.join('\n')).not.toMatch(/TTL/);
    expect(questdb.statements.join('\n')).toMatch(/DEDUP ENABLE UPSERT KEYS\(time, ship_id, cargo_id, site\)/);
  });

  it('makes refused credentials an error for the operator, at the table set-up and at a write', async () => {
    const questdb = new StandIn();
    questdb.refuseSql = new QuestDbError('QuestDB refused the credentials (401): Unauthorized', 'error');
    const sink = target(questdb);
    expect(await sink.ready()).toMatchObject({ ok: false, level: 'error', message: expect.stringMatching(/401/) });
    questdb.refuseSql = undefined;
    expect(await sink.ready()).toEqual({ ok: true });
    questdb.answer = { ok: false, kind: 'failed', message: 'QuestDB refused the credentials (401): token revoked', level: 'error' };
    expect(await sink.deliver(RECORDS)).toEqual({
      ok: false,
      level: 'error',
      message: 'QuestDB refused the credentials (401): token revoked',
    });
  });

  it('passes a pause the server asked for on to the sink loop, as a passing failure', async () => {
    const questdb = new StandIn();
    questdb.answer = { ok: false, kind: 'failed', message: 'QuestDB answered 503: busy', level: 'warn', retryAfterMs: 7000 };
    const sink = target(questdb);
    expect(await sink.ready()).toEqual({ ok: true });
    expect(await sink.deliver(RECORDS)).toEqual({
      ok: false,
      level: 'warn',
      message: 'QuestDB answered 503: busy',
      retryAfterMs: 7000,
    });
  });
});

describe('the remote QuestDB sink from the configuration', () => {
  const tokenFile = join(tempDir('remote-spec'), 'token');
  writeFileSync(tokenFile, 'remote-token-0123456789abcdef');

  it('is a QuestDB sink named remote-questdb with the token and its own table, after the local sink', () => {
    const config = loadConfig({
      REMOTE_QUESTDB_URL: 'https://q.example.com',
      REMOTE_QUESTDB_TOKEN_FILE: tokenFile,
      REMOTE_QUESTDB_TABLE: 'sites',
    });
    const spec = remoteQuestDbSpec(config);
    expect(spec).toMatchObject({
      kind: 'questdb',
      name: 'remote-questdb',
      policy: 'drop_oldest',
      backfill: false,
      table: 'sites',
      retentionDays: undefined,
      questdb: { url: 'https://q.example.com', token: 'remote-token-0123456789abcdef', username: undefined },
    });
    expect(spec?.describe).not.toContain('remote-token');
    expect(sinkSpecs(config).map((s) => s.name)).toEqual(['questdb', 'remote-questdb']);
    expect(remoteQuestDbSpec(loadConfig({}))).toBeUndefined();
  });

  it('leaves the local sink out with LOCAL_QUESTDB=off, and refuses a gateway left without any sink', () => {
    const forwarding = loadConfig({
      LOCAL_QUESTDB: 'off',
      REMOTE_QUESTDB_URL: 'https://q.example.com',
      REMOTE_QUESTDB_TOKEN_FILE: tokenFile,
    });
    expect(sinkSpecs(forwarding).map((s) => s.name)).toEqual(['remote-questdb']);
    expect(() => loadConfig({ LOCAL_QUESTDB: 'off' })).toThrow(/LOCAL_QUESTDB=off leaves the gateway without a sink/);
  });
});
