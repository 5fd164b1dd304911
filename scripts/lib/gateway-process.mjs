// The built gateway as its own process, for the tests, the fault runs and the benchmarks: the V8
// heap settings it ships with, its JSON log lines kept, and its address once it listens.
import { spawn } from 'node:child_process';
import { GATEWAY_GLIBC_TUNABLES, GATEWAY_NODE_OPTIONS } from './node-options.mjs';

/**
 * @typedef {object} GatewayProcess
 * @property {import('node:child_process').ChildProcess} child
 * @property {number} pid
 * @property {string} url
 * @property {Record<string, unknown>[]} logs  every log line so far, parsed (others as `{ msg }`)
 * @property {() => string} stderr             the last 10,000 characters of its standard error
 * @property {Promise<{ code: number | null, signal: NodeJS.Signals | null }>} exited
 */

/**
 * Starts the bundle and resolves once it logged that it listens. `wrap` runs it through another
 * command that ends by executing its arguments (taskset, unshare); the process dies with ours.
 * `nodeArgs` go to node before the bundle (those NODE_OPTIONS does not take, such as --cpu-prof).
 * @param {{ bundle: string, env: Record<string, string>, wrap?: string[], nodeArgs?: string[], timeoutMs?: number }} options
 * @returns {Promise<GatewayProcess>}
 */
export async function startGatewayProcess(options) {
  const env = {
    PATH: process.env.PATH ?? '',
    NODE_OPTIONS: GATEWAY_NODE_OPTIONS,
    GLIBC_TUNABLES: GATEWAY_GLIBC_TUNABLES,
    HOST: '127.0.0.1',
    PORT: '0',
    HTTPS_PORT: '0',
    LOG_LEVEL: 'info',
    ...options.env,
  };
  const [command, ...args] = [...(options.wrap ?? []), process.execPath, ...(options.nodeArgs ?? []), options.bundle];
  const child = spawn(/** @type {string} */ (command), args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
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
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  /** @type {Promise<{ code: number | null, signal: NodeJS.Signals | null }>} */
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      process.off('exit', killOnExit);
      resolve({ code, signal });
    }),
  );

  const deadline = Date.now() + (options.timeoutMs ?? 15_000);
  for (;;) {
    const started = logs.find((l) => l.event === 'started');
    if (started !== undefined) {
      const port = String(started.address).split(':').pop();
      return { child, pid: /** @type {number} */ (child.pid), url: `http://127.0.0.1:${port}`, logs, stderr: () => stderr, exited };
    }
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `gateway did not start (${child.exitCode ?? child.signalCode ?? 'timeout'}): ${stderr}\n${JSON.stringify(logs.slice(-5))}`,
      );
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Waits until the gateway's queue is empty, asking `status` (its /status) every 100 ms; throws after `timeoutMs`.
 * @param {() => Promise<{ queue: { readings: number } }>} status
 * @param {number} [timeoutMs]
 */
export async function waitForEmptyQueue(status, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  while ((await status()).queue.readings > 0) {
    if (Date.now() > deadline) throw new Error(`backlog did not drain within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
