import { realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEVELOPMENT_API_KEY, loadConfig } from './config.js';
import { renderConfigReference, renderConfigTable } from './config-table.js';
import { SETTINGS } from './settings.js';
import { readFileSync } from 'node:fs';
import { tempDir } from '../../test/support/temp-dir.js';
import { problemsOf } from '../../test/support/config-problems.js';

const secretFile = (content: string): string => {
  const path = join(tempDir('secret'), 'secret');
  writeFileSync(path, content);
  return path;
};

describe('loadConfig', () => {
  it('has documented defaults for every setting', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      environment: 'development',
      port: 8000,
      durability: 'power-loss',
      queueMaxBytes: 1024 ** 3,
      maxBodyBytes: 1024 ** 2,
      maxBatchReadings: 10_000,
      maxIdLength: 100,
      questdbUrl: 'http://127.0.0.1:9000',
      table: 'cargo_data',
      retentionDays: 365,
      apiKey: DEVELOPMENT_API_KEY,
      apiKeySource: 'development default',
      // DATA_DIR (./data) as the file system resolves it from the working directory.
      dataDir: join(realpathSync(process.cwd()), 'data'),
      apiKeysFile: join(realpathSync(process.cwd()), 'data', 'api-keys'),
      authFailureDelayMaxMs: 500,
    });
  });

  it('serves the public development key on loopback only: unset, empty or shipped keys are refused beyond it, however started', () => {
    expect(loadConfig({})).toMatchObject({ host: '127.0.0.1', apiKey: DEVELOPMENT_API_KEY });
    expect(loadConfig({ API_KEY: 'site-key-0123456789' }).host).toBe('0.0.0.0');
    expect(loadConfig({ HOST: '::1', API_KEY: '' }).host).toBe('::1');
    const own = 'set a key of your own';
    expect(problemsOf({ HOST: '0.0.0.0' })).toEqual([
      expect.stringMatching(
        /^API_KEY is unset, so devices would use the public development key, and the gateway is reachable beyond loopback \(HOST=0\.0\.0\.0\)/,
      ),
    ]);
    expect(problemsOf({ HOST: '0.0.0.0' })[0]).toContain(own);
    // An empty key is an error, never "unset", where it would reach a listener beyond loopback.
    expect(problemsOf({ API_KEY: '' })).toEqual([
      expect.stringMatching(/^API_KEY is empty and the gateway is reachable beyond loopback \(HOST=0\.0\.0\.0\)/),
    ]);
    expect(problemsOf({ HOST: '192.168.1.10', API_KEY: DEVELOPMENT_API_KEY })).toEqual([
      expect.stringMatching(/^API_KEY is a shipped test default and the gateway is reachable beyond loopback \(HOST=192\.168\.1\.10\)/),
    ]);
    // Inside a container the gateway listens everywhere; what counts is where its ports are published.
    const container = { HOST: '0.0.0.0', API_KEY: DEVELOPMENT_API_KEY, GRAFANA_ADMIN_PASSWORD: 'admin' };
    expect(loadConfig({ ...container, PUBLISHED_ADDRESS: '127.0.0.1' }).host).toBe('0.0.0.0');
    expect(problemsOf({ ...container, PUBLISHED_ADDRESS: '' })).toHaveLength(2);
    const published = problemsOf({ ...container, PUBLISHED_ADDRESS: '0.0.0.0' });
    expect(published).toEqual([
      expect.stringMatching(
        /^API_KEY is a shipped test default and the gateway is reachable beyond loopback \(PUBLISHED_ADDRESS=0\.0\.0\.0\)/,
      ),
      expect.stringMatching(/^GRAFANA_ADMIN_PASSWORD is a shipped test default and the stack is published beyond loopback/),
    ]);
    expect(published.join('\n')).not.toContain(DEVELOPMENT_API_KEY);
    expect(problemsOf({ ...container, API_KEY: 'site-key-0123456789', PUBLISHED_ADDRESS: '10.0.0.5' })).toEqual([
      expect.stringMatching(/^GRAFANA_ADMIN_PASSWORD is a shipped test default/),
    ]);
    expect(
      loadConfig({
        ...container,
        API_KEY: 'site-key-0123456789',
        GRAFANA_ADMIN_PASSWORD: 'grafana-site-pw-42',
        PUBLISHED_ADDRESS: '10.0.0.5',
      }).host,
    ).toBe('0.0.0.0');
    for (const loopback of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1'])
      expect(loadConfig({ HOST: loopback, API_KEY: '' }).host, loopback).toBe(loopback);
  });

  it('refuses to forward under a fallen-back site id many machines share, and says where the site id came from', () => {
    const forwarding = { KAFKA_BROKERS: 'kafka:9092' };
    expect(problemsOf({ ...forwarding, GATEWAY_NAME: 'raspberrypi' })).toEqual([
      expect.stringMatching(/^SITE_ID is not set and the site id falls back to the gateway's name \(GATEWAY_NAME\) "raspberrypi"/),
    ]);
    expect(loadConfig({ ...forwarding, GATEWAY_NAME: 'raspberrypi', SITE_ID: 'pier-7' })).toMatchObject({
      siteId: 'pier-7',
      siteIdSource: 'SITE_ID',
      forwards: true,
    });
    expect(loadConfig({ GATEWAY_NAME: 'raspberrypi' })).toMatchObject({
      siteId: 'raspberrypi',
      siteIdSource: 'GATEWAY_NAME',
      forwards: false,
    });
  });

  it('names every invalid variable in one error', () => {
    const problems = problemsOf({ PORT: 'eighty', DURABILITY: 'maybe', QUEUE_MAX_BYTES: '12 parsecs', RETENTION_DAYS: '-1' });
    expect(problems).toHaveLength(4);
    expect(problems[0]).toMatch(/^PORT must be a whole number \(got "eighty"\)/);
    expect(problems.join('\n')).toMatch(/DURABILITY/);
    expect(problems.join('\n')).toMatch(/QUEUE_MAX_BYTES must be a size/);
    expect(problems.join('\n')).toMatch(/RETENTION_DAYS must be at least 0/);
  });

  it('accepts reading times back to the retention less the lead ahead, which must be shorter', () => {
    expect(loadConfig({}).readingTimes).toEqual({
      maxAheadS: 86_400,
      maxAgeS: 364 * 86_400,
      ageReason: 'RETENTION_DAYS=365, less MAX_TIME_AHEAD_S',
    });
    expect(loadConfig({ RETENTION_DAYS: '0' }).readingTimes).toEqual({ maxAheadS: 86_400, maxAgeS: undefined });
    expect(loadConfig({ RETENTION_DAYS: '1', MAX_TIME_AHEAD_S: '3600' }).readingTimes.maxAgeS).toBe(82_800);
    expect(
      loadConfig({ LOCAL_QUESTDB: 'off', UPSTREAM_URL: 'https://central.example/api/v2/ingest/batch', UPSTREAM_API_KEY: 'k'.repeat(20) })
        .readingTimes.maxAgeS,
    ).toBeUndefined();
    // Older readings only for a remote sink that keeps them.
    expect(problemsOf({ MAX_TIME_AGE_DAYS: '3650' }).join('\n')).toMatch(
      /MAX_TIME_AGE_DAYS accepts readings older than the local table keeps/,
    );
    expect(
      loadConfig({
        MAX_TIME_AGE_DAYS: '3650',
        UPSTREAM_URL: 'https://central.example/api/v2/ingest/batch',
        UPSTREAM_API_KEY: 'k'.repeat(20),
      }).readingTimes,
    ).toEqual({ maxAheadS: 86_400, maxAgeS: 3650 * 86_400, ageReason: 'MAX_TIME_AGE_DAYS=3650' });
    expect(problemsOf({ RETENTION_DAYS: '1' }).join('\n')).toMatch(
      /MAX_TIME_AHEAD_S \(86400 s\) must be shorter than RETENTION_DAYS \(1 days\)/,
    );
  });

  it('never repeats a secret in its error', () => {
    const problems = problemsOf({ API_KEY: 'x'.repeat(5000) });
    expect(problems.join('\n')).not.toContain('xxxx');
  });

  it('refuses cheap hours for a sink without a bandwidth budget, which they would leave doing nothing', () => {
    const upstream = { UPSTREAM_URL: 'https://central.example/api/v2/ingest/batch', UPSTREAM_API_KEY: 'k'.repeat(20) };
    expect(problemsOf({ ...upstream, UPSTREAM_CHEAP_HOURS: '22:00-06:00' })).toEqual([
      'UPSTREAM_CHEAP_HOURS applies only to a bandwidth budget: set UPSTREAM_MAX_BYTES_PER_S too, or leave the hours out',
    ]);
    expect(
      loadConfig({ ...upstream, UPSTREAM_CHEAP_HOURS: '22:00-06:00', UPSTREAM_MAX_BYTES_PER_S: '2000' }).upstream?.cheapHours,
    ).toHaveLength(1);
  });

  it('keeps part of MAX_CONNECTIONS for devices', () => {
    expect(loadConfig({})).toMatchObject({ maxConnections: 1024, maxUnprovenConnections: 128, unprovenTimeoutMs: 5000 });
    expect(problemsOf({ MAX_CONNECTIONS: '100', MAX_UNPROVEN_CONNECTIONS: '100' })).toEqual([
      'MAX_UNPROVEN_CONNECTIONS (100) must be less than MAX_CONNECTIONS (100): the rest is kept for devices',
    ]);
  });

  it('refuses a wrong-key delay that would outlast the read timeouts of device stacks', () => {
    expect(problemsOf({ AUTH_FAILURE_DELAY_MAX_MS: '5000' })[0]).toMatch(/^AUTH_FAILURE_DELAY_MAX_MS must be at most 1000/);
    expect(loadConfig({ AUTH_FAILURE_DELAY_MAX_MS: '1000' }).authFailureDelayMaxMs).toBe(1000);
  });

  it('refuses credentials inside the QuestDB URL', () => {
    expect(problemsOf({ QUESTDB_URL: 'http://admin:quest@127.0.0.1:9000' })[0]).toMatch(/^QUESTDB_URL/);
  });

  it('reads the API key from a file, or from the systemd credentials directory', () => {
    expect(loadConfig({ API_KEY_FILE: secretFile('from-file-key\n') })).toMatchObject({ apiKey: 'from-file-key', apiKeySource: 'file' });
    const credentials = tempDir('cred');
    writeFileSync(join(credentials, 'api_key'), 'credential-key');
    expect(loadConfig({ CREDENTIALS_DIRECTORY: credentials })).toMatchObject({
      apiKey: 'credential-key',
      apiKeySource: 'systemd credential',
    });
  });

  it('wants a key that survives an HTTP header: printable ASCII without spaces', () => {
    expect(problemsOf({ API_KEY: 'has space' })[0]).toMatch(/^API_KEY must be printable ASCII without spaces$/);
    expect(problemsOf({ API_KEY_FILE: secretFile('ключ-key') })[0]).toMatch(/API_KEY_FILE: the key in .* must be printable ASCII/);
  });

  it('refuses an unreadable or empty key file and two sources at once', () => {
    expect(problemsOf({ API_KEY_FILE: '/nonexistent/key' })[0]).toMatch(/API_KEY_FILE cannot be read: ENOENT/);
    expect(problemsOf({ API_KEY_FILE: secretFile('  \n') })[0]).toMatch(/empty file/);
    expect(problemsOf({ API_KEY: 'a', API_KEY_FILE: secretFile('b') })[0]).toMatch(/only one of API_KEY and API_KEY_FILE/);
  });

  it('in production refuses a missing, shipped or short key and the QuestDB default password', () => {
    expect(problemsOf({ GATEWAY_ENV: 'production' })[0]).toMatch(/API_KEY is required in production/);
    expect(problemsOf({ GATEWAY_ENV: 'production', API_KEY: DEVELOPMENT_API_KEY })[0]).toMatch(/shipped test default/);
    expect(problemsOf({ GATEWAY_ENV: 'production', API_KEY: 'short' })[0]).toMatch(/at least 16 characters/);
    expect(
      problemsOf({
        GATEWAY_ENV: 'production',
        API_KEY: 'a-long-enough-production-key',
        QUESTDB_USERNAME: 'admin',
        QUESTDB_PASSWORD: 'quest',
      })[0],
    ).toMatch(/QUESTDB_PASSWORD is a shipped test default/);
    expect(loadConfig({ GATEWAY_ENV: 'production', API_KEY: 'a-long-enough-production-key' }).apiKey).toBe('a-long-enough-production-key');
  });

  it('reads the console password and the /metrics token from values, files or credentials; production refuses weak ones', () => {
    const credentials = tempDir('cred');
    writeFileSync(join(credentials, 'console_password'), 'console-from-credential\n');
    writeFileSync(join(credentials, 'metrics_token'), 'metrics-from-credential');
    expect(loadConfig({ CREDENTIALS_DIRECTORY: credentials })).toMatchObject({
      consolePassword: 'console-from-credential',
      metricsToken: 'metrics-from-credential',
    });
    expect(loadConfig({ CONSOLE_PASSWORD_FILE: secretFile('from-file\n') }).consolePassword).toBe('from-file');
    expect(loadConfig({}).consolePassword).toBeUndefined();
    const production = { GATEWAY_ENV: 'production', API_KEY: 'a-long-enough-production-key' };
    expect(problemsOf({ ...production, CONSOLE_PASSWORD: 'admin' })).toContain(
      'CONSOLE_PASSWORD is a shipped test default; set your own before running in production',
    );
    expect(problemsOf({ ...production, CONSOLE_PASSWORD: 'short-one' })).toContain(
      'CONSOLE_PASSWORD must be at least 16 characters in production',
    );
    expect(problemsOf({ ...production, CONSOLE_PASSWORD: production.API_KEY })).toContain(
      'CONSOLE_PASSWORD must differ from API_KEY: device keys never open the console',
    );
    expect(problemsOf({ CONSOLE_PASSWORD: DEVELOPMENT_API_KEY })).toContain(
      'CONSOLE_PASSWORD must differ from API_KEY: device keys never open the console',
    );
    expect(problemsOf({ ...production, METRICS_TOKEN: 'short' })).toContain('METRICS_TOKEN must be at least 16 characters in production');
    expect(loadConfig({ ...production, CONSOLE_PASSWORD: 'a-long-console-password' }).consolePassword).toBe('a-long-console-password');
  });

  it('wants the QuestDB user and password together', () => {
    expect(problemsOf({ QUESTDB_USERNAME: 'admin' })[0]).toMatch(/QUESTDB_USERNAME and QUESTDB_PASSWORD must be set together/);
  });
});

describe('configuration reference', () => {
  it('lists every variable, and docs/configuration.md is what the settings render (else: npm run build && node scripts/update-config-reference.mjs)', () => {
    const table = renderConfigTable();
    for (const setting of Object.values(SETTINGS)) expect(table).toContain(`| \`${setting.env}\` |`);
    const reference = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'configuration.md'), 'utf8');
    expect(reference).toBe(renderConfigReference());
  });
});
