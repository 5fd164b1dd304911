// wrk, the load generator: installed from Debian's packages when missing, run pinned to the
// generator's CPUs, its result read from the line the Lua script prints when it is done.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cpuSeconds } from '../../scripts/lib/proc.mjs';

export const WRK_SCRIPT = fileURLToPath(new URL('../wrk/ingest.lua', import.meta.url));

/** wrk's version line, or undefined when it is not installed. */
function wrkVersion() {
  const result = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  if (result.error) return undefined;
  return /wrk [^\s]+/.exec(`${result.stdout}${result.stderr}`)?.[0];
}

/**
 * @param {string[]} args
 */
function apt(args) {
  const asRoot = process.getuid?.() === 0;
  const command = asRoot ? 'apt-get' : 'sudo';
  const full = asRoot ? args : ['-n', 'apt-get', ...args];
  const result = spawnSync(command, full, {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return result.status === 0;
}

/** Makes sure wrk is installed (Debian package `wrk`) and returns its version. */
export function ensureWrk() {
  const present = wrkVersion();
  if (present) return present;
  process.stdout.write('wrk is missing: installing the Debian package with apt-get\n');
  if (!apt(['install', '-y', '--no-install-recommends', 'wrk'])) {
    if (!apt(['update']) || !apt(['install', '-y', '--no-install-recommends', 'wrk'])) {
      throw new Error('could not install wrk with apt-get (needs root or password-less sudo); install the Debian package wrk');
    }
  }
  const installed = wrkVersion();
  if (!installed) throw new Error('wrk was installed but does not run');
  return installed;
}

/**
 * @typedef {object} WrkResult
 * @property {number} durationUs
 * @property {number} requests
 * @property {number} bytes
 * @property {{ connect: number, read: number, write: number, status: number, timeout: number }} errors
 * @property {{ p50: number, p90: number, p99: number, max: number, mean: number }} latencyUs
 * @property {number | undefined} cpuSeconds  wrk's own CPU time (sampled until shortly before it ended)
 */

/**
 * Runs wrk with the ingest script against `url` and resolves with its result.
 * @param {{ url: string, threads: number, connections: number, durationS: number, cpus?: string,
 *           env: Record<string, string>, timeoutS?: number, headers?: string[] }} options
 * @returns {Promise<WrkResult>}
 */
export function runWrk(options) {
  const args = [
    '-t',
    String(options.threads),
    '-c',
    String(options.connections),
    '-d',
    `${options.durationS}s`,
    '--timeout',
    `${options.timeoutS ?? 10}s`,
    '-s',
    WRK_SCRIPT,
    ...(options.headers ?? []).flatMap((header) => ['-H', header]),
    options.url,
  ];
  const [command, argv] = options.cpus ? ['taskset', ['-c', options.cpus, 'wrk', ...args]] : ['wrk', args];
  const child = spawn(command, argv, {
    env: { ...process.env, BENCH_THREADS: String(options.threads), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  /** @type {number | undefined} */
  let cpu;
  // /proc/<pid> is gone once wrk exits: keep the latest reading of its CPU time.
  const sampler = setInterval(() => {
    if (child.pid !== undefined) cpu = cpuSeconds(child.pid) ?? cpu;
  }, 200);
  return new Promise((resolve, reject) => {
    child.once('error', (error) => {
      clearInterval(sampler);
      reject(error);
    });
    child.once('exit', (code) => {
      clearInterval(sampler);
      const line = output.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
      if (code !== 0 || line === undefined) {
        reject(new Error(`wrk exited with ${code}:\n${output.slice(-3000)}`));
        return;
      }
      resolve({ ...JSON.parse(line.slice('BENCH_RESULT '.length)), cpuSeconds: cpu });
    });
  });
}
