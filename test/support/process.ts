import { readFileSync } from 'node:fs';
import { inject } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../../scripts/lib/gateway-process.mjs';
import { TEST_KEY } from './gateway.js';
import { uniqueTable } from './questdb-sql.js';
import { tempDir } from './temp-dir.js';

export type { GatewayProcess };

/** Runs the built bundle as its own process (for signals and kill -9) and waits until it listens. */
export function spawnGateway(env: Record<string, string>): Promise<GatewayProcess> {
  return startGatewayProcess({ bundle: inject('bundlePath'), env: { RETENTION_DAYS: '0', ...env } });
}

/**
 * A test gateway's settings: the test key, the suite's QuestDB, its own data directory and table
 * named after `label`, no health rows; `env` adds to them or overrides them.
 */
export function gatewayEnv(
  label: string,
  env: Record<string, string> = {},
): Record<string, string> & { DATA_DIR: string; QUESTDB_TABLE: string } {
  return {
    API_KEY: TEST_KEY,
    DATA_DIR: tempDir(label),
    QUESTDB_URL: inject('questdbUrl'),
    QUESTDB_TABLE: uniqueTable(label.replaceAll('-', '_')),
    HEALTH_REPORT: 'false',
    ...env,
  };
}

/** Kills (-9) each gateway process and waits until it has ended. */
export async function killAll(processes: GatewayProcess[]): Promise<void> {
  for (const p of processes) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
}

/** Resident memory of a process now and at its peak (VmHWM), in MB. */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)![1]);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}
