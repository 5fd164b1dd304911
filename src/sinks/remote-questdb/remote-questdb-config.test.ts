import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/config.js';
import { createSelfSignedCertificate } from '../../tls/self-signed.js';
import { tempDir } from '../../../test/support/temp-dir.js';
import { problemsOf } from '../../../test/support/config-problems.js';

const file = (name: string, content: string): string => {
  const path = join(tempDir('remote-qdb'), name);
  writeFileSync(path, content);
  return path;
};

const PRODUCTION = { GATEWAY_ENV: 'production', API_KEY: 'a-long-enough-production-key' };
const TOKEN = 'remote-token-0123456789abcdef';

describe('remote QuestDB settings', () => {
  it('has no remote QuestDB sink unless its URL is set, and keeps the local one on', () => {
    const config = loadConfig({});
    expect(config.remoteQuestdb).toBeUndefined();
    expect(config.localQuestdb).toBe(true);
    expect(loadConfig({ LOCAL_QUESTDB: 'off', KAFKA_BROKERS: 'kafka.example.com:9092' }).localQuestdb).toBe(false);
  });

  it('takes the token from a file or the remote_questdb_token credential, the CA from a PEM file, and the common sink settings', () => {
    const ca = createSelfSignedCertificate({ commonName: 'ca', altNames: ['localhost'], validDays: 1 }).cert;
    const config = loadConfig({
      REMOTE_QUESTDB_URL: 'https://questdb.example.com:9000/',
      REMOTE_QUESTDB_TOKEN_FILE: file('token', `${TOKEN}\n`),
      REMOTE_QUESTDB_CA_FILE: file('ca.pem', ca),
      REMOTE_QUESTDB_TABLE: 'site_readings',
      REMOTE_QUESTDB_POLICY: 'block',
      REMOTE_QUESTDB_BACKFILL: 'on',
      REMOTE_QUESTDB_BATCH_READINGS: '5000',
    });
    expect(config.remoteQuestdb).toEqual({
      url: 'https://questdb.example.com:9000',
      token: TOKEN,
      ca,
      table: 'site_readings',
      policy: 'block',
      backfill: true,
      batchReadings: 5000,
      flushIntervalMs: 1000,
      compression: 'gzip',
      maxBytesPerS: 0,
      cheapHours: [],
    });
    const credentials = tempDir('cred');
    writeFileSync(join(credentials, 'remote_questdb_token'), TOKEN);
    expect(loadConfig({ REMOTE_QUESTDB_URL: 'https://q.example.com', CREDENTIALS_DIRECTORY: credentials }).remoteQuestdb).toMatchObject({
      token: TOKEN,
      policy: 'drop_oldest',
      backfill: false,
      table: 'cargo_data',
    });
  });

  it('refuses settings it cannot use, naming each', () => {
    expect(problemsOf({ REMOTE_QUESTDB_URL: 'https://user:secret@q.example.com' })[0]).toMatch(
      /^REMOTE_QUESTDB_URL must be an http:\/\/ or https:\/\//,
    );
    expect(problemsOf({ REMOTE_QUESTDB_URL: 'ftp://q.example.com' })[0]).toMatch(/^REMOTE_QUESTDB_URL/);
    expect(problemsOf({ REMOTE_QUESTDB_TOKEN_FILE: file('t', TOKEN) })).toEqual([
      'REMOTE_QUESTDB_TOKEN_FILE is set but REMOTE_QUESTDB_URL is not',
    ]);
    expect(problemsOf({ REMOTE_QUESTDB_URL: 'https://q.example.com', REMOTE_QUESTDB_TOKEN_FILE: '/nonexistent/token' })[0]).toMatch(
      /REMOTE_QUESTDB_TOKEN_FILE cannot be read: ENOENT/,
    );
    expect(problemsOf({ REMOTE_QUESTDB_URL: 'https://q.example.com', REMOTE_QUESTDB_TOKEN_FILE: file('t', 'two words') })[0]).toMatch(
      /printable ASCII/,
    );
    expect(
      problemsOf({ REMOTE_QUESTDB_URL: 'https://q.example.com', REMOTE_QUESTDB_CA_FILE: file('ca.pem', 'not a certificate') }),
    ).toEqual([expect.stringMatching(/^REMOTE_QUESTDB_CA_FILE holds no PEM certificate/)]);
    expect(problemsOf({ REMOTE_QUESTDB_URL: 'http://q.example.com', REMOTE_QUESTDB_CA_FILE: '/nonexistent/ca.pem' })).toEqual([
      'REMOTE_QUESTDB_CA_FILE needs an https:// REMOTE_QUESTDB_URL',
      expect.stringMatching(/^REMOTE_QUESTDB_CA_FILE cannot be read: ENOENT/),
    ]);
    expect(problemsOf({ REMOTE_QUESTDB_URL: 'https://q.example.com', REMOTE_QUESTDB_POLICY: 'keep' })[0]).toMatch(/^REMOTE_QUESTDB_POLICY/);
    expect(problemsOf({ LOCAL_QUESTDB: 'maybe' })[0]).toMatch(/^LOCAL_QUESTDB/);
  });

  it('in production wants https:// and a token of its own, and never repeats the token', () => {
    expect(problemsOf({ ...PRODUCTION, REMOTE_QUESTDB_URL: 'http://q.example.com', REMOTE_QUESTDB_TOKEN_FILE: file('t', TOKEN) })).toEqual([
      expect.stringMatching(/^REMOTE_QUESTDB_URL must be https:\/\/ in production/),
    ]);
    expect(problemsOf({ ...PRODUCTION, REMOTE_QUESTDB_URL: 'https://q.example.com' })).toEqual([
      expect.stringMatching(/needs a token in production/),
    ]);
    const short = problemsOf({ ...PRODUCTION, REMOTE_QUESTDB_URL: 'https://q.example.com', REMOTE_QUESTDB_TOKEN_FILE: file('t', 'short') });
    expect(short).toEqual([expect.stringMatching(/remote QuestDB token must be at least 16 characters/)]);
    expect(short.join('\n')).not.toContain('short');
    expect(
      loadConfig({ ...PRODUCTION, REMOTE_QUESTDB_URL: 'https://q.example.com', REMOTE_QUESTDB_TOKEN_FILE: file('t', TOKEN) }).remoteQuestdb
        ?.token,
    ).toBe(TOKEN);
  });
});
