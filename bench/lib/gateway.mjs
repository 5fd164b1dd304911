// The gateway under test: the built bundle as its own process (pinned to its CPUs), its JSON log
// lines kept for the figures they carry, and its /status endpoint.
import { spawn } from 'node:child_process';
import { GATEWAY_NODE_OPTIONS } from '../../scripts/node-options.mjs';

/**
 * @typedef {object} GatewayStatus
 * @property {{ records: number, readings: number, bytes: number, commits: number, oldestAgeSeconds: number | null }} queue
 * @property {{ acceptedRequests: number, acceptedReadings: number, refusedRequests: number, flushes: number, flushFailures: number, flushedReadings: number, deadLettered: number }} totals
 * @property {number} deadLetters
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
 * Starts the bundle and resolves once it logged that it listens.
 * @param {{ bundle: string, env: Record<string, string>, apiKey: string, cpus?: string }} options
 * @returns {Promise<BenchGateway>}
 */
export async function startGateway(options) {
  const env = {
    PATH: process.env.PATH ?? '',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    GATEWAY_NAME: 'bench',
    API_KEY: options.apiKey,
    ...options.env,
  };
  // The V8 heap settings the gateway ships with, as the systemd unit and the container run it.
  const nodeArgs = [...GATEWAY_NODE_OPTIONS.split(' '), options.bundle];
  const [command, args] = options.cpus ? ['taskset', ['-c', options.cpus, process.execPath, ...nodeArgs]] : [process.execPath, nodeArgs];
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  /** @type {Record<string, unknown>[]} */
  const logs = [];
  let partial = '';
  let stderr = '';
  child.stdout.on('data', (/** @type {Buffer} */ chunk) => {
    partial += chunk.toString();
    const lines = partial.split('\n');
    partial = /** @type {string} */ (lines.pop());
    for (const line of lines) {
      if (line.trim() === '') continue;
      try {
        logs.push(JSON.parse(line));
      } catch {
        logs.push({ msg: line });
      }
    }
  });
  child.stderr.on('data', (/** @type {Buffer} */ chunk) => (stderr = (stderr + chunk.toString()).slice(-10_000)));
  /** @type {Promise<{ code: number | null, signal: NodeJS.Signals | null }>} */
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const deadline = Date.now() + 30_000;
  let port;
  for (;;) {
    const started = logs.find((l) => l.event === 'started');
    if (started !== undefined) {
      port = String(started.address).split(':').pop();
      break;
    }
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gateway did not start (${child.exitCode ?? child.signalCode}): ${stderr}\n${JSON.stringify(logs.slice(-5))}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const url = `http://127.0.0.1:${port}`;
  /** The process's state and its last words, for errors. */
  const describe = () => {
    const state = child.exitCode !== null || child.signalCode !== null ? `exited with ${child.exitCode ?? child.signalCode}` : 'running';
    const last = logs.slice(-3).map((l) => JSON.stringify(l)).join(' ');
    return `pid ${child.pid} ${state}; last log lines: ${last}${stderr ? `; stderr: ${stderr.slice(-500)}` : ''}`;
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
      process.off('exit', killOnExit);
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}
