import type { ChildProcess } from 'node:child_process';
import { inject } from 'vitest';
import { startGatewayProcess } from '../../scripts/lib/gateway-process.mjs';

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  /** Every log line so far, parsed. */
  logs(): Record<string, unknown>[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs the built bundle as its own process (for signals and kill -9) and waits until it listens. */
export async function spawnGateway(env: Record<string, string>): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({ bundle: inject('bundlePath'), env: { RETENTION_DAYS: '0', ...env } });
  return { child: gateway.child, url: gateway.url, logs: () => gateway.logs, exited: gateway.exited };
}
