import { inject } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { startGateway, type Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/log/logger.js';
import { uniqueTable } from './questdb-sql.js';
import { tempDir } from './temp-dir.js';

export const TEST_KEY = 'test-key-0123456789';
/** A lead over the clock that reaches every time QuestDB stores. */
export const FAR_AHEAD_S = '9999999999';

/** An answer's status and its JSON body. */
export const jsonAnswer = async (response: Response) => ({
  status: response.status,
  body: (await response.json()) as Record<string, unknown>,
});

export interface TestGateway {
  gateway: Gateway;
  url: string;
  table: string;
  dataDir: string;
  env: Record<string, string>;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  stop(): Promise<void>;
}

/** Starts an in-process gateway on a free port with its own queue directory and QuestDB table. */
export async function startTestGateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const dataDir = env['DATA_DIR'] ?? tempDir('gw');
  const table = env['QUESTDB_TABLE'] ?? uniqueTable('gw');
  const fullEnv = {
    PORT: '0',
    HTTPS_PORT: '0',
    HOST: '127.0.0.1',
    API_KEY: TEST_KEY,
    DATA_DIR: dataDir,
    QUESTDB_URL: inject('questdbUrl'),
    QUESTDB_TABLE: table,
    FLUSH_INTERVAL_MS: '50',
    FLUSH_BACKOFF_MAX_MS: '500',
    DURABILITY: 'process-crash',
    LOG_LEVEL: 'silent',
    HEALTH_REPORT: 'false',
    // Tests write fixed dates; a TTL would drop them once they are a year old. Some lie far ahead
    // (the round trips reach 2261): the time window has its own tests.
    RETENTION_DAYS: '0',
    // A lead that far is refused beside a TTL: tests that set one get the default lead.
    ...((env['RETENTION_DAYS'] ?? '0') === '0' ? { MAX_TIME_AHEAD_S: FAR_AHEAD_S } : {}),
    ...env,
  };
  const config = loadConfig(fullEnv);
  const gateway = await startGateway(config, createLogger(config.logLevel), { deliveryScript: inject('bundlePath'), env: fullEnv });
  return {
    gateway,
    url: gateway.url,
    table,
    dataDir,
    env: fullEnv,
    post: (path, body, headers = {}) =>
      fetch(`${gateway.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY, ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    stop: () => gateway.stop(),
  };
}
