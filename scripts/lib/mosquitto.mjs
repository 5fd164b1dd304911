// Debian's Mosquitto broker and its command-line clients, installed by the project's own apt step:
// a site broker for the subscription tests, fault runs and benchmarks (the ceiling MQTT throughput
// on the same machine), and mosquitto_pub/mosquitto_sub as real clients of the gateway.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { aptInstall } from './apt.mjs';
import { freePort } from './ports.mjs';

export const MOSQUITTO = '/usr/sbin/mosquitto';
export const MOSQUITTO_PUB = '/usr/bin/mosquitto_pub';
export const MOSQUITTO_SUB = '/usr/bin/mosquitto_sub';

/** Installs the broker and the clients when missing. */
export function installMosquitto() {
  aptInstall(['mosquitto'], MOSQUITTO);
  aptInstall(['mosquitto-clients'], MOSQUITTO_PUB);
}

/**
 * @typedef {object} MosquittoBroker
 * @property {number} port
 * @property {() => number | undefined} pid  the running broker's process id
 * @property {string} url           mqtt://127.0.0.1:port
 * @property {string} dataDir       its persistence directory, kept across restart()
 * @property {() => Promise<void>} restart  stops it (SIGTERM: it saves its sessions) and starts it again on the same port
 * @property {() => Promise<void>} stop     stops it and removes its directory
 * @property {() => string} log
 */

/**
 * Starts a Mosquitto broker on a free loopback port, as a site runs one: persistence on (sessions
 * and queued QoS 1 messages survive its restart), anonymous clients allowed, and room for the
 * messages a persistent session collects while its subscriber is away. `upgradeOutgoingQos`
 * delivers every message at the QoS its subscriber asked for (2 for the gateway), whatever its
 * publisher used, as docs/mqtt.md advises a site that wants each reading stored once.
 * @param {{ maxQueuedMessages?: number, maxInflight?: number, upgradeOutgoingQos?: boolean }} [options]
 * @returns {Promise<MosquittoBroker>}
 */
export async function startMosquitto(options = {}) {
  installMosquitto();
  const dir = mkdtempSync(join(tmpdir(), 'harbor-mosquitto-'));
  const port = await freePort();
  const config = join(dir, 'mosquitto.conf');
  writeFileSync(
    config,
    [
      `listener ${port} 127.0.0.1`,
      'allow_anonymous true',
      'persistence true',
      `persistence_location ${dir}/`,
      'autosave_interval 1',
      `max_queued_messages ${options.maxQueuedMessages ?? 1_000_000}`,
      `max_inflight_messages ${options.maxInflight ?? 100}`,
      'max_keepalive 65535',
      ...(options.upgradeOutgoingQos === true ? ['upgrade_outgoing_qos true'] : []),
      // Run as root, it would switch to the user mosquitto, who cannot write this run's directory.
      ...(process.getuid?.() === 0 ? ['user root'] : []),
      'log_dest stderr',
      'log_type error',
      'log_type warning',
      '',
    ].join('\n'),
  );
  let log = '';
  /** @type {import('node:child_process').ChildProcess | undefined} */
  let child;
  const start = async () => {
    child = spawn(MOSQUITTO, ['-c', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr?.on('data', (/** @type {Buffer} */ chunk) => (log = (log + chunk.toString()).slice(-20_000)));
    const killOnExit = () => child?.kill('SIGKILL');
    process.once('exit', killOnExit);
    child.once('exit', () => process.off('exit', killOnExit));
    const deadline = Date.now() + 15_000;
    while (!(await accepts(port))) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`mosquitto did not start: ${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const halt = async () => {
    const running = child;
    if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGTERM');
    await exited;
  };
  await start();
  return {
    port,
    pid: () => child?.pid,
    url: `mqtt://127.0.0.1:${port}`,
    dataDir: dir,
    restart: async () => {
      await halt();
      await start();
    },
    stop: async () => {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => log,
  };
}

/** @param {number} port */
function accepts(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Runs mosquitto_pub once; resolves with its exit code and output.
 * @param {string[]} args
 */
export function mosquittoPub(args) {
  const result = spawnSync(MOSQUITTO_PUB, args, { encoding: 'utf8', timeout: 30_000 });
  return { status: result.status, stderr: result.stderr, stdout: result.stdout };
}
