import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { loadConfig } from './config.js';
import { problemsOf } from '../../test/support/config-problems.js';

describe('Kafka sink settings', () => {
  it('leave the sink out until brokers are set', () => {
    expect(loadConfig({}).kafka).toBeUndefined();
  });

  it('gather into one object with documented defaults', () => {
    expect(loadConfig({ KAFKA_BROKERS: 'kafka-1:9092, kafka-2:9092', GATEWAY_NAME: 'pier 7' }).kafka).toEqual({
      brokers: ['kafka-1:9092', 'kafka-2:9092'],
      topic: 'cargo_data',
      clientId: 'harbor-gateway-pier_7',
      tls: false,
      tlsCaFile: undefined,
      sasl: undefined,
      timeoutMs: 30_000,
      policy: 'drop_oldest',
      backfill: false,
      batchReadings: 20_000,
      flushIntervalMs: 1000,
      compression: 'gzip',
      order: 'oldest_first',
      maxBytesPerS: 0,
      cheapHours: [],
    });
  });

  it('take TLS, a CA file, SASL and the sink policy', () => {
    const kafka = loadConfig({
      KAFKA_BROKERS: 'kafka.example:9093',
      KAFKA_TOPIC: 'fleet.readings',
      KAFKA_TLS_CA_FILE: '/etc/harbor/kafka-ca.pem',
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: 'site-17',
      KAFKA_SASL_PASSWORD: 'a-password',
      KAFKA_POLICY: 'block',
      KAFKA_BACKFILL: 'on',
      KAFKA_COMPRESSION: 'lz4',
    }).kafka;
    expect(kafka).toMatchObject({
      topic: 'fleet.readings',
      tls: true,
      tlsCaFile: '/etc/harbor/kafka-ca.pem',
      sasl: { mechanism: 'SCRAM-SHA-512', username: 'site-17', password: 'a-password' },
      policy: 'block',
      backfill: true,
      compression: 'lz4',
    });
    expect(problemsOf({ KAFKA_BROKERS: 'kafka:9092', KAFKA_COMPRESSION: 'zstd' })).toEqual([expect.stringMatching(/^KAFKA_COMPRESSION /)]);
  });

  it('read the SASL password from a systemd credential', () => {
    const credentials = tempDir('credentials');
    mkdirSync(credentials, { recursive: true });
    writeFileSync(join(credentials, 'kafka_sasl_password'), 'from-the-credential\n');
    const kafka = loadConfig({
      KAFKA_BROKERS: 'kafka:9092',
      KAFKA_SASL_MECHANISM: 'PLAIN',
      KAFKA_SASL_USERNAME: 'site-17',
      CREDENTIALS_DIRECTORY: credentials,
    }).kafka;
    expect(kafka?.sasl?.password).toBe('from-the-credential');
  });

  it('refuse bad values, naming the variable and never echoing the password', () => {
    const problems = problemsOf({
      KAFKA_BROKERS: 'kafka:9092,no-port',
      KAFKA_TOPIC: 'bad topic',
      KAFKA_SASL_MECHANISM: 'GSSAPI',
      KAFKA_SASL_PASSWORD: '',
    });
    expect(problems).toEqual([
      expect.stringMatching(/^KAFKA_BROKERS must be host:port/),
      expect.stringMatching(/^KAFKA_TOPIC must be a Kafka topic name/),
      expect.stringMatching(/^KAFKA_SASL_MECHANISM must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512/),
    ]);
    const partial = problemsOf({ KAFKA_BROKERS: 'kafka:9092', KAFKA_SASL_USERNAME: 'site-17', KAFKA_SASL_PASSWORD: 'secret-value-123' });
    expect(partial).toEqual(['KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD must be set together']);
    expect(partial.join()).not.toContain('secret-value-123');
  });

  it('in production refuse a short password and PLAIN without TLS', () => {
    const production = { GATEWAY_ENV: 'production', API_KEY: 'a-long-enough-production-key', KAFKA_BROKERS: 'kafka:9092' };
    const sasl = { KAFKA_SASL_MECHANISM: 'PLAIN', KAFKA_SASL_USERNAME: 'site-17', KAFKA_SASL_PASSWORD: 'short' };
    expect(problemsOf({ ...production, ...sasl })).toEqual([
      'KAFKA_SASL_PASSWORD must be at least 16 characters in production',
      'KAFKA_SASL_MECHANISM PLAIN sends the password in clear: set KAFKA_TLS in production',
    ]);
    expect(loadConfig({ ...production, ...sasl, KAFKA_SASL_PASSWORD: 'a-long-enough-password', KAFKA_TLS: 'on' }).kafka?.tls).toBe(true);
  });
});
