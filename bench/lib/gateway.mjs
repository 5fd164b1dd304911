// The gateway under test: the built bundle as its own process (pinned to its CPUs), its JSON log
// lines kept for the figures they carry, and its /status endpoint.
import { startGatewayProcess } from '../../scripts/lib/gateway-process.mjs';

/**
 * @typedef {object} GatewayStatus
 * @property {{ records: number, readings: number, bytes: number, commits: number, oldestAgeSeconds: number | null }} queue
 * @property {{ acceptedRequests: number, acceptedReadings: number, refusedRequests: number, flushes: number, flushFailures: number, flushedReadings: number, deadLettered: number }} totals
 * @property {number} deadLetters
 * @property {{ name: string, backlog: number }[]} sinks
 * @property {{ rssBytes: number, heapUsedBytes: number, heapTotalBytes?: number, deliveryHeapUsedBytes?: number, deliveryHeapTotalBytes?: number }} memory
 */

/**
 * @typedef {object} BenchGateway
 * @property {number} pid
 * @property {string} url
 * @property {Record<string, unknown>[]} logs   every log line so far, parsed
 * @property {() => Promise<GatewayStatus>} status
 * @property {(signal?: NodeJS.Signals) => Promise<{ code: number | null, signal: NodeJS.Signals | null }>} stop
 */

/**
 * Starts the bundle (scripts/lib/gateway-process.mjs) pinned to `cpus` and resolves once it listens.
 * @param {{ bundle: string, env: Record<string, string>, apiKey: string, cpus?: string, nodeArgs?: string[] }} options
 * @returns {Promise<BenchGateway>}
 */
export async function startBenchGateway(options) {
  const { child, url, logs, stderr, exited } = await startGatewayProcess({
    bundle: options.bundle,
    env: { GATEWAY_NAME: 'bench', API_KEY: options.apiKey, ...options.env },
    wrap: options.cpus ? ['taskset', '-c', options.cpus] : [],
    nodeArgs: options.nodeArgs,
    timeoutMs: 30_000,
  });
  /** The process's state and its last words, for errors. */
  const describe = () => {
    const state = child.exitCode !== null || child.signalCode !== null ? `exited with ${child.exitCode ?? child.signalCode}` : 'running';
    const last = logs
      .slice(-3)
      .map((l) => JSON.stringify(l))
      .join(' ');
    return `pid ${child.pid} ${state}; last log lines: ${last}${stderr() ? `; stderr: ${stderr().slice(-500)}` : ''}`;
  };
  return {
    pid: /** @type {number} */ (child.pid),
    url,
    logs,
    async status() {
      let response;
      try {
        response = await fetch(`${url}/status`, { headers: { 'X-API-Key': options.apiKey } });
      } catch (error) {
        throw new Error(`gateway /status unreachable (${describe()}): ${/** @type {Error} */ (error).message}`);
      }
      if (!response.ok) throw new Error(`gateway /status answered ${response.status} (${describe()})`);
      return /** @type {Promise<GatewayStatus>} */ (response.json());
    },
    async stop(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}
