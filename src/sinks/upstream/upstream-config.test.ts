import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/config.js';
import { sinkSpecs } from '../sink-specs.js';
import { tempDir } from '../../../test/support/temp-dir.js';
import { problemsOf } from '../../../test/support/config-problems.js';

const keyFile = (content: string): string => {
  const path = join(tempDir('upstream-key'), 'key');
  writeFileSync(path, content);
  return path;
};

const URL = 'https://harbor.example/api/v2/ingest/h-42/batch';
const PRODUCTION = { GATEWAY_ENV: 'production', API_KEY: 'site-ingest-key-0123456789' };

describe('upstream settings', () => {
  it('leave the upstream sink off without UPSTREAM_URL', () => {
    expect(loadConfig({}).upstream).toBeUndefined();
  });

  it('gather into one object with their defaults, the URL kept as written', () => {
    expect(loadConfig({ UPSTREAM_URL: URL, UPSTREAM_API_KEY_FILE: keyFile('upstream-key-0123456789\n') }).upstream).toEqual({
      url: URL,
      apiKey: 'upstream-key-0123456789',
      apiKeySource: 'file',
      caFile: undefined,
      proxy: undefined,
      timeoutMs: 30_000,
      maxBodyBytes: 1024 * 1024,
      policy: 'drop_oldest',
      backfill: false,
      batchReadings: 1000,
      flushIntervalMs: 1000,
      compression: 'gzip',
      order: 'oldest_first',
      maxBytesPerS: 0,
      cheapHours: [],
    });
    expect(Object.keys(loadConfig({})).filter((key) => key.startsWith('upstream'))).toEqual(['upstream']);
  });

  it('take cheap hours for the budget into the sink, and say what is wrong with a stretch of the day', () => {
    const env = { UPSTREAM_URL: URL, UPSTREAM_API_KEY: 'dev-key', UPSTREAM_MAX_BYTES_PER_S: '4KiB' };
    const config = loadConfig({ ...env, UPSTREAM_CHEAP_HOURS: '22:00-06:00,12:00-13:00' });
    expect(config.upstream?.cheapHours).toEqual([
      { start: 1320, end: 360 },
      { start: 720, end: 780 },
    ]);
    expect(sinkSpecs(config).find((s) => s.name === 'upstream')).toMatchObject({
      maxBytesPerS: 4096,
      cheapHours: config.upstream?.cheapHours,
    });
    expect(problemsOf({ ...env, UPSTREAM_CHEAP_HOURS: '22:00-30:00' })).toEqual([
      expect.stringMatching(/^UPSTREAM_CHEAP_HOURS.*"22:00-30:00" is not a stretch of the day as HH:MM-HH:MM/),
    ]);
  });

  it('read the key from the systemd credential upstream_api_key', () => {
    const credentials = tempDir('credentials');
    mkdirSync(credentials, { recursive: true });
    writeFileSync(join(credentials, 'upstream_api_key'), 'credential-key-0123456789');
    expect(loadConfig({ UPSTREAM_URL: URL, CREDENTIALS_DIRECTORY: credentials }).upstream).toMatchObject({
      apiKey: 'credential-key-0123456789',
      apiKeySource: 'systemd credential',
    });
  });

  it('want a key when UPSTREAM_URL is set', () => {
    expect(problemsOf({ UPSTREAM_URL: URL })).toEqual([expect.stringMatching(/^UPSTREAM_URL needs a key/)]);
  });

  it('take a plain UPSTREAM_API_KEY only outside production', () => {
    expect(loadConfig({ UPSTREAM_URL: URL, UPSTREAM_API_KEY: 'dev-key' }).upstream?.apiKeySource).toBe('environment');
    const problems = problemsOf({ ...PRODUCTION, UPSTREAM_URL: URL, UPSTREAM_API_KEY: 'upstream-key-0123456789' });
    expect(problems).toEqual([expect.stringMatching(/^UPSTREAM_API_KEY is refused in production/)]);
    expect(problems.join('\n')).not.toContain('upstream-key-0123456789');
    expect(problemsOf({ ...PRODUCTION, UPSTREAM_URL: URL, UPSTREAM_API_KEY_FILE: keyFile('short') })).toEqual([
      'UPSTREAM_API_KEY must be at least 16 characters in production',
    ]);
    expect(
      loadConfig({ ...PRODUCTION, UPSTREAM_URL: URL, UPSTREAM_API_KEY_FILE: keyFile('upstream-key-0123456789') }).upstream,
    ).toBeDefined();
  });

  it('refuse credentials in the URLs, a proxy that is not plain http://, and a bad policy', () => {
    const problems = problemsOf({
      UPSTREAM_URL: 'https://user:pw@harbor.example/batch',
      UPSTREAM_API_KEY: 'k',
      UPSTREAM_PROXY: 'https://proxy.example:3128',
      UPSTREAM_POLICY: 'keep',
    });
    expect(problems.join('\n')).toMatch(/UPSTREAM_URL must be an http:\/\/ or https:\/\/ URL without credentials/);
    expect(problems.join('\n')).toMatch(/UPSTREAM_PROXY must be http:\/\/host:port/);
    expect(problems.join('\n')).toMatch(/UPSTREAM_POLICY/);
    expect(problems.join('\n')).not.toContain('user:pw');
    expect(problemsOf({ UPSTREAM_URL: URL, UPSTREAM_API_KEY: 'k', UPSTREAM_PROXY: 'http://u:p@proxy:3128' })).toHaveLength(1);
  });

  it('refuse a URL without the batch ingest path, which would be answered 404 forever', () => {
    for (const url of ['https://central.example.com:443', 'https://central.example.com/api/v2/ingest', 'https://c.example/api/v2/batch']) {
      expect(problemsOf({ UPSTREAM_URL: url, UPSTREAM_API_KEY: 'k' }).join('\n')).toMatch(/UPSTREAM_URL must be the whole batch endpoint/);
    }
    for (const url of [
      'https://central.example.com/api/v2/ingest/batch',
      'https://central.example.com:8443/api/v2/ingest/batch/',
      'https://proxy.example/harbor/api/v2/ingest/batch',
      'https://harbor.example/api/v2/ingest/h-42/batch',
      'https://harbor.example/api/v2/ingest/ingest/h-42/batch',
      'https://harbor.example/api/v1/ingest/ingest/h-42/batch',
    ]) {
      expect(loadConfig({ UPSTREAM_URL: url, UPSTREAM_API_KEY: 'k' }).upstream?.url, url).toBe(url);
    }
  });

  it('read the sink settings', () => {
    const upstream = loadConfig({
      UPSTREAM_URL: URL,
      UPSTREAM_API_KEY: 'k',
      UPSTREAM_PROXY: 'http://proxy.site:3128',
      UPSTREAM_CA_FILE: '/etc/harbor/ca.pem',
      UPSTREAM_TIMEOUT_MS: '5000',
      UPSTREAM_MAX_BODY_BYTES: '256KiB',
      UPSTREAM_POLICY: 'block',
      UPSTREAM_BACKFILL: 'on',
      UPSTREAM_BATCH_READINGS: '100',
      UPSTREAM_COMPRESSION: 'deflate',
    }).upstream;
    expect(upstream).toMatchObject({
      proxy: 'http://proxy.site:3128',
      caFile: '/etc/harbor/ca.pem',
      timeoutMs: 5000,
      maxBodyBytes: 256 * 1024,
      policy: 'block',
      backfill: true,
      batchReadings: 100,
      compression: 'deflate',
    });
    expect(problemsOf({ UPSTREAM_URL: URL, UPSTREAM_API_KEY: 'k', UPSTREAM_COMPRESSION: 'zstd' })).toEqual([
      expect.stringMatching(/^UPSTREAM_COMPRESSION /),
    ]);
  });

  it('add the upstream sink after the local QuestDB, its description without the key', () => {
    const specs = sinkSpecs(
      loadConfig({ UPSTREAM_URL: URL, UPSTREAM_API_KEY: 'upstream-key-0123456789', UPSTREAM_PROXY: 'http://proxy:3128' }),
    );
    expect(specs.map((s) => s.name)).toEqual(['questdb', 'upstream']);
    expect(specs[1]).toMatchObject({ kind: 'upstream', policy: 'drop_oldest', backfill: false, batchReadings: 1000, compression: 'gzip' });
    expect(specs[1]!.describe).toBe(`${URL} via proxy http://proxy:3128`);
    expect(sinkSpecs(loadConfig({})).map((s) => s.name)).toEqual(['questdb']);
  });
});
