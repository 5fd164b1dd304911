import { inject } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../../scripts/lib/gateway-process.mjs';

export type { GatewayProcess };

/** Runs the built bundle as its own process (for signals and kill -9) and waits until it listens. */
export function spawnGateway(env: Record<string, string>): Promise<GatewayProcess> {
  return startGatewayProcess({ bundle: inject('bundlePath'), env: { RETENTION_DAYS: '0', ...env } });
}
