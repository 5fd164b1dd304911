// Crash consistency over MQTT: the gateway killed with SIGKILL at random moments under QoS 1 load
// and restarted, many rounds, in one of two forms:
//   publish:   devices publish to the gateway (MQTT.js, MQTT 3.1.1); a reading counts as promised
//              once its PUBACK arrived;
//   subscribe: devices publish to a site Mosquitto the gateway subscribes to on a persistent
//              session; every message Mosquitto acknowledged to its publisher counts as promised.
// Afterwards every promised reading is in QuestDB exactly once, and no refused one is there.
// With a `storage` that drops what was not fsynced (powercut-fs), each kill is also a power cut.
//
// Run by scripts/faults/run.mjs (short) and scripts/faults/mqtt-power-cuts.mjs (long).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { BASE_NS, isoOf, prng, storedKeys } from './crash-consistency.mjs';
import { startGatewayProcess } from './gateway-process.mjs';
import { startMosquitto } from './mosquitto.mjs';
import { waitForWalApplied } from './questdb-sql.mjs';

const KEY = 'mqtt-crash-key-0123456789';
const MIN_ACKS_PER_ROUND = 30;
/** QoS 1 publishes each client keeps in flight. */
const WINDOW = 16;

/**
 * @typedef {{ rounds: number, durability: 'power-loss' | 'process-crash', form: 'publish' | 'subscribe', questdbUrl: string,
 *             bundlePath: string, clients?: number, seed?: number, storage?: import('./crash-consistency.mjs').CrashStorage,
 *             log?: (line: string) => void, roundMs?: { min: number, max: number } }} MqttCrashOptions
 * @typedef {{ form: string, rounds: number, acknowledged: number, refused: number, unknown: number, stored: number,
 *             missing: string[], forbidden: string[], strangers: string[], duplicates: number, roundsWithLoss: number }} MqttCrashReport
 */

/**
 * Waits until the gateway at `gatewayUrl` receives from the broker: probe messages without numbers
 * (acknowledged, never stored) until its subscription counts one.
 * @param {string} brokerUrl @param {string} gatewayUrl
 */
async function subscribed(brokerUrl, gatewayUrl) {
  const probe = mqtt.connect(brokerUrl, { protocolVersion: 4, reconnectPeriod: 0 });
  const deadline = Date.now() + 30_000;
  try {
    for (;;) {
      if (probe.connected) probe.publish('load/probe', '{}', { qos: 1 });
      const status = /** @type {{ mqtt?: { subscription: { messages: number } | null } }} */ (
        await (await fetch(`${gatewayUrl}/status`, { headers: { 'x-api-key': KEY } })).json()
      );
      if ((status.mqtt?.subscription?.messages ?? 0) > 0) return;
      if (Date.now() > deadline) throw new Error('the gateway did not receive from the broker within 30 s');
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    probe.end(true);
  }
}

/** @returns {import('./crash-consistency.mjs').CrashStorage} */
function plainStorage() {
  const dir = mkdtempSync(join(tmpdir(), 'harbor-mqtt-crash-'));
  return { open: async () => dir, afterKill: async () => undefined, close: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** @param {MqttCrashOptions} options @returns {Promise<MqttCrashReport>} */
export async function runMqttCrashConsistency(options) {
  const { rounds, durability, form, questdbUrl, bundlePath, clients = 4, seed = Date.now(), log = () => undefined } = options;
  const storage = options.storage ?? plainStorage();
  const roundMs = options.roundMs ?? { min: 300, max: 1500 };
  const random = prng(seed);
  const table = `mqtt_${form}_${durability.replace('-', '_')}_${process.pid}_${Math.floor(random() * 1e9)}`;
  const broker = form === 'subscribe' ? await startMosquitto() : undefined;
  const env = {
    API_KEY: KEY,
    DURABILITY: durability,
    QUESTDB_URL: questdbUrl,
    QUESTDB_TABLE: table,
    FLUSH_INTERVAL_MS: '20',
    HEALTH_REPORT: 'false',
    RETENTION_DAYS: '0',
    ...(form === 'publish'
      ? { MQTT: 'on', MQTT_PORT: '0', MQTT_TLS_PORT: '0' }
      : {
          MQTT_SUBSCRIBE_URL: broker?.url ?? '',
          MQTT_SUBSCRIBE_TOPICS: 'load/+',
          MQTT_SUBSCRIBE_SHIP: 'topic:1',
          MQTT_SUBSCRIBE_TIME: 'field:time',
          MQTT_SUBSCRIBE_CLIENT_ID: 'harbor-crash-rounds',
        }),
  };
  /** @type {Map<string, 'ok' | 'refused' | 'unknown'>} */
  const ledger = new Map();
  /** @type {Map<string, number>} round a promised reading was acknowledged in */
  const ackRound = new Map();
  let sequence = 0n;
  log(`MQTT crash consistency (${form}): ${rounds} rounds, ${durability}, seed ${seed}, table ${table}`);
  /** @type {import('./gateway-process.mjs').GatewayProcess | undefined} */
  let gateway;
  /** Publishers of the subscribe form: they talk to the broker, which is never killed. @type {Promise<void> | undefined} */
  let publishers;
  let publishing = false;

  /**
   * One client publishing QoS 1 until `alive()` says stop; each 12th message is refused by the
   * schema (its value is not a number) and must never be stored.
   * @param {string} url @param {number} id @param {() => boolean} alive @param {number} round @param {(round: number) => void} [counted]
   */
  const client = async (url, id, alive, round, counted) => {
    const connection = mqtt.connect(url, {
      protocolVersion: 4,
      reconnectPeriod: 0,
      connectTimeout: 5000,
      username: `device-${id}`,
      password: KEY,
    });
    const connected = await new Promise((resolve) => {
      connection.once('connect', () => resolve(true));
      connection.once('error', () => resolve(false));
      connection.once('close', () => resolve(false));
    });
    if (!connected) {
      connection.end(true);
      return;
    }
    let inflight = 0;
    let n = 0;
    while (alive() && connection.connected) {
      if (inflight >= WINDOW) {
        await new Promise((r) => setTimeout(r, 2));
        continue;
      }
      sequence += 1n;
      const seq = sequence;
      const ship = `device-${id}`;
      const key = `${ship}|${seq}`;
      const poisoned = ++n % 12 === 0;
      const topic = form === 'publish' ? `harbor/v1/${ship}/seq` : `load/${ship}`;
      const payload = JSON.stringify(
        form === 'publish'
          ? { value: poisoned ? 'x' : Number(seq), time: isoOf(BASE_NS + seq) }
          : { time: isoOf(BASE_NS + seq), seq: poisoned ? 'x' : Number(seq) },
      );
      // A refused publish is acknowledged too (MQTT 3.1.1): what matters is that it is never stored.
      ledger.set(key, 'unknown');
      inflight += 1;
      connection.publish(topic, payload, { qos: 1 }, (error) => {
        inflight -= 1;
        if (error) return;
        ledger.set(key, poisoned ? 'refused' : 'ok');
        if (!poisoned) ackRound.set(key, round);
        counted?.(round);
      });
      if (n % WINDOW === 0) await new Promise((r) => setImmediate(r));
      // A site's devices publish at their pace, not as fast as the broker takes it: the gateway must
      // catch up with what they sent while it was down.
      if (form === 'subscribe' && n % 4 === 0) await new Promise((r) => setTimeout(r, 10));
    }
    connection.end(true);
  };

  try {
    if (broker !== undefined) {
      // A broker queues messages for a session only once it subscribed: the first gateway run makes it.
      const first = plainStorage();
      gateway = await startGatewayProcess({ bundle: bundlePath, env: { ...env, DATA_DIR: await first.open() } });
      await subscribed(broker.url, gateway.url);
      gateway.child.kill('SIGTERM');
      await gateway.exited;
      await first.close();
      // The site's devices publish all along; the gateway comes and goes.
      publishing = true;
      publishers = Promise.all(Array.from({ length: clients }, (_, id) => client(broker.url, id, () => publishing, 0))).then(
        () => undefined,
      );
    }
    for (let round = 1; round <= rounds; round++) {
      gateway = await startGatewayProcess({ bundle: bundlePath, env: { ...env, DATA_DIR: await storage.open() } });
      let alive = true;
      let acks = 0;
      let load = Promise.resolve();
      if (form === 'publish') {
        const started = /** @type {{ address: string }} */ (gateway.logs.find((l) => l.event === 'mqtt_started'));
        const url = `mqtt://127.0.0.1:${started.address.split(':').pop()}`;
        load = Promise.all(
          Array.from({ length: clients }, (_, id) =>
            client(
              url,
              id,
              () => alive,
              round,
              () => (acks += 1),
            ),
          ),
        ).then(() => undefined);
      }
      const countAt = ackRound.size;
      const killAt = Date.now() + roundMs.min + random() * (roundMs.max - roundMs.min);
      const progressed = () => (form === 'publish' ? acks : ackRound.size - countAt) >= MIN_ACKS_PER_ROUND;
      while (Date.now() < killAt || !progressed()) await new Promise((r) => setTimeout(r, 5));
      gateway.child.kill('SIGKILL');
      await gateway.exited;
      alive = false;
      await load;
      await storage.afterKill(random);
      log(`round ${round}: ${ledger.size} messages sent so far`);
    }
    publishing = false;
    await publishers;

    gateway = await startGatewayProcess({ bundle: bundlePath, env: { ...env, DATA_DIR: await storage.open() } });
    const promised = [...ledger].filter(([, outcome]) => outcome === 'ok').length;
    // Until every promised reading is stored, or nothing more arrives for 5 s with the queue empty
    // (what a cut took in process-crash mode never comes).
    const deadline = Date.now() + 120_000;
    let last = -1;
    let steadySince = Date.now();
    for (;;) {
      const status = /** @type {{ queue: { readings: number } }} */ (
        await (await fetch(`${gateway.url}/status`, { headers: { 'x-api-key': KEY } })).json()
      );
      await waitForWalApplied(questdbUrl, table, 30_000).catch(() => undefined);
      const stored = await storedKeys(questdbUrl, table).catch(() => new Map());
      const have = [...ledger].filter(([key, outcome]) => outcome === 'ok' && stored.has(key)).length;
      if (status.queue.readings === 0 && have === promised) break;
      if (stored.size !== last || status.queue.readings > 0) {
        last = stored.size;
        steadySince = Date.now();
      } else if (Date.now() - steadySince > 5000) break;
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    gateway.child.kill('SIGTERM');
    await gateway.exited;
    await waitForWalApplied(questdbUrl, table, 30_000);
    const stored = await storedKeys(questdbUrl, table);
    /** @type {MqttCrashReport} */
    const report = {
      form,
      rounds,
      acknowledged: 0,
      refused: 0,
      unknown: 0,
      stored: 0,
      missing: [],
      forbidden: [],
      strangers: [],
      duplicates: 0,
      roundsWithLoss: 0,
    };
    for (const count of stored.values()) report.stored += count;
    const lossRounds = new Set();
    for (const [key, outcome] of ledger) {
      if (outcome === 'ok') {
        report.acknowledged += 1;
        if (!stored.has(key)) {
          report.missing.push(key);
          lossRounds.add(ackRound.get(key));
        }
      } else if (outcome === 'refused') {
        report.refused += 1;
        if (stored.has(key)) report.forbidden.push(key);
      } else {
        report.unknown += 1;
      }
    }
    for (const [key, count] of stored) {
      if (!ledger.has(key)) report.strangers.push(key);
      if (count > 1) report.duplicates += count - 1;
    }
    report.roundsWithLoss = lossRounds.size;
    log(`stored ${report.stored}: ${report.acknowledged} acknowledged, ${report.refused} refused, ${report.unknown} unacknowledged`);
    return report;
  } finally {
    publishing = false;
    if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) {
      gateway.child.kill('SIGKILL');
      await gateway.exited;
    }
    await broker?.stop();
    await storage.close();
  }
}
