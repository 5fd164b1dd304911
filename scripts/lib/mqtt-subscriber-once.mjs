// The subscriber's exactly-once run: site devices publish bursts of QoS 1 messages into a real
// Mosquitto (persistence on, every message delivered at its subscriber's QoS), the gateway
// subscribed to it with the Tasmota preset, so every reading is stamped with the time it was
// received and QuestDB's deduplication cannot hide a copy. The gateway is killed with SIGKILL in the
// middle of each burst and started again; in some rounds the broker is restarted (SIGTERM: it saves
// its sessions) while the gateway runs. Afterwards every message Mosquitto acknowledged to its
// publisher is in QuestDB exactly once, each of the others at most once, and every message whose
// ship id the schema refuses is one dead letter, never two.
//
// Run by scripts/faults/run.mjs (short) and scripts/faults/mqtt-subscriber-once.mjs (long).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import mqtt from 'mqtt';
import { prng } from './crash-consistency.mjs';
import { startGatewayProcess } from './gateway-process.mjs';
import { startMosquitto } from './mosquitto.mjs';
import { sql, waitForWalApplied } from './questdb-sql.mjs';

const KEY = 'mqtt-once-key-0123456789';
/** QoS 1 publishes each device keeps in flight. */
const WINDOW = 16;
/** A ship id over MAX_ID_LENGTH: the schema refuses the message, which becomes a dead letter. */
const REFUSED_SHIP = 'x'.repeat(120);

/**
 * @typedef {{ rounds: number, burst: number, brokerRestarts: number, durability: 'power-loss' | 'process-crash',
 *             questdbUrl: string, bundlePath: string, upgradeQos?: boolean, devices?: number, seed?: number,
 *             log?: (line: string) => void, killAfterMs?: { min: number, max: number } }} OnceOptions
 * @typedef {{ rounds: number, brokerRestarts: number, published: number, acknowledged: number, unknown: number,
 *             stored: number, lost: number, duplicates: number, strangers: number, refusedAcknowledged: number,
 *             deadLetters: number, deadLetterCopies: number, deadLettersLost: number, idsKept: number,
 *             missing: string[], twice: string[] }} OnceReport
 */

/**
 * Devices publishing to the broker: `publish(count)` sends `count` messages spread over them, each
 * device reconnecting when the broker goes away; a message whose PUBACK never came is unknown.
 * @param {string} url @param {number} devices
 */
function siteDevices(url, devices) {
  /** @type {Map<string, 'ok' | 'refused' | 'unknown'>} key ship|seq */
  const ledger = new Map();
  let sequence = 0;
  /** @param {number} id @param {number} count */
  const device = async (id, count) => {
    let sent = 0;
    while (sent < count) {
      const connection = mqtt.connect(url, {
        protocolVersion: 4,
        reconnectPeriod: 0,
        connectTimeout: 5000,
        clientId: `device-${id}-${sent}`,
      });
      const connected = await new Promise((resolve) => {
        connection.once('connect', () => resolve(true));
        connection.once('error', () => resolve(false));
        connection.once('close', () => resolve(false));
      });
      if (!connected) {
        connection.end(true);
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      let inflight = 0;
      while (sent < count && connection.connected) {
        if (inflight >= WINDOW) {
          await new Promise((r) => setTimeout(r, 2));
          continue;
        }
        sequence += 1;
        sent += 1;
        const seq = sequence;
        const refused = seq % 12 === 0;
        const ship = refused ? REFUSED_SHIP : `device-${id}`;
        const key = `${ship}|${seq}`;
        ledger.set(key, 'unknown');
        inflight += 1;
        connection.publish(`tele/${ship}/SENSOR`, JSON.stringify({ Time: '2026-11-28T10:00:00', seq }), { qos: 1 }, (error) => {
          inflight -= 1;
          if (!error) ledger.set(key, refused ? 'refused' : 'ok');
        });
        if (sent % WINDOW === 0) await new Promise((r) => setImmediate(r));
      }
      // Waits for the PUBACKs still to come, unless the broker went away.
      const until = Date.now() + 5000;
      while (inflight > 0 && connection.connected && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
      connection.end(true);
    }
  };
  return {
    ledger,
    /** @param {number} count */
    publish: (count) =>
      Promise.all(Array.from({ length: devices }, (_, id) => device(id, Math.ceil(count / devices)))).then(() => undefined),
  };
}

/** @param {OnceOptions} options @returns {Promise<OnceReport>} */
export async function runMqttSubscriberOnce(options) {
  const {
    rounds,
    burst,
    brokerRestarts,
    durability,
    questdbUrl,
    bundlePath,
    devices = 4,
    seed = Date.now(),
    log = () => undefined,
  } = options;
  const killAfterMs = options.killAfterMs ?? { min: 300, max: 3000 };
  const random = prng(seed);
  const table = `mqtt_once_${durability.replace('-', '_')}_${process.pid}_${Math.floor(random() * 1e9)}`;
  const broker = await startMosquitto({ upgradeOutgoingQos: options.upgradeQos ?? true });
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-mqtt-once-'));
  const env = {
    API_KEY: KEY,
    DATA_DIR: dataDir,
    DURABILITY: durability,
    QUESTDB_URL: questdbUrl,
    QUESTDB_TABLE: table,
    FLUSH_INTERVAL_MS: '20',
    HEALTH_REPORT: 'false',
    RETENTION_DAYS: '0',
    MQTT_SUBSCRIBE_URL: broker.url,
    MQTT_SUBSCRIBE_PRESET: 'tasmota',
    MQTT_SUBSCRIBE_CLIENT_ID: 'harbor-once-rounds',
  };
  const site = siteDevices(broker.url, devices);
  // Broker restarts go to evenly spread rounds.
  const restartRounds = new Set(Array.from({ length: brokerRestarts }, (_, i) => Math.floor(((i + 0.5) * rounds) / brokerRestarts) + 1));
  log(
    `MQTT subscriber exactly once: ${rounds} rounds of ${burst} QoS 1 messages, broker restarted in rounds ${[...restartRounds].join(', ')}, ` +
      `${durability}, QoS ${options.upgradeQos === false ? '1 (as published)' : '2 (upgraded by the broker)'}, seed ${seed}, table ${table}`,
  );
  /** @type {import('./gateway-process.mjs').GatewayProcess | undefined} */
  let gateway;
  try {
    for (let round = 1; round <= rounds; round++) {
      gateway = await startGatewayProcess({ bundle: bundlePath, env });
      // A broker keeps messages for a session only once it subscribed: the first round waits for that.
      if (round === 1) await granted(gateway.url);
      const publishing = site.publish(burst);
      // Killed while messages flow in: once it took a random share of a burst, or at the latest after killAfterMs.
      const share = Math.floor(burst * (0.1 + 0.6 * random()));
      const killAt = Date.now() + killAfterMs.min + random() * (killAfterMs.max - killAfterMs.min);
      while (Date.now() < killAt && (await received(gateway.url)) < share) await new Promise((r) => setTimeout(r, 20));
      if (restartRounds.has(round)) {
        await broker.restart();
        await new Promise((r) => setTimeout(r, 200 + random() * 800));
      }
      gateway.child.kill('SIGKILL');
      await gateway.exited;
      await publishing;
      log(`round ${round}: ${site.ledger.size} messages published so far${restartRounds.has(round) ? ', broker restarted' : ''}`);
    }

    gateway = await startGatewayProcess({ bundle: bundlePath, env });
    const promised = [...site.ledger].filter(([, outcome]) => outcome === 'ok').map(([key]) => key);
    // Until every promised reading is stored and the queue is empty, or nothing more arrives for 10 s.
    const deadline = Date.now() + 180_000;
    let last = -1;
    let steadySince = Date.now();
    for (;;) {
      const running = gateway;
      const status = /** @type {{ queue: { readings: number } }} */ (
        await fetch(`${running.url}/status`, { headers: { 'x-api-key': KEY } })
          .then((response) => response.json())
          .catch((error) => {
            // A loaded machine may drop a connection; a gateway that died is a failure.
            if (running.child.exitCode !== null || running.child.signalCode !== null) {
              throw new Error(`the gateway exited: ${running.stderr().slice(-2000)}`, { cause: error });
            }
            return { queue: { readings: Number.NaN } };
          })
      );
      await waitForWalApplied(questdbUrl, table, 30_000).catch(() => undefined);
      const stored = await storedSeqs(questdbUrl, table).catch(() => new Map());
      if (status.queue.readings === 0 && promised.every((key) => stored.has(key))) break;
      if (stored.size !== last || status.queue.readings !== 0) {
        last = stored.size;
        steadySince = Date.now();
      } else if (Date.now() - steadySince > 10_000) break;
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    // Copies still on their way would arrive now: a few seconds more, then the final count.
    await new Promise((r) => setTimeout(r, 3000));
    gateway.child.kill('SIGTERM');
    await gateway.exited;
    await waitForWalApplied(questdbUrl, table, 30_000);
    const stored = await storedSeqs(questdbUrl, table);
    const db = new Database(join(dataDir, 'queue.db'), { readonly: true });
    const letters = db.prepare("SELECT line FROM dead_letters WHERE sink = 'mqtt-subscribe'").pluck().all();
    const idsKept = /** @type {number} */ (db.prepare('SELECT COUNT(*) FROM mqtt_received').pluck().get());
    db.close();
    /** @type {Map<number, number>} */
    const letterSeqs = new Map();
    for (const line of /** @type {string[]} */ (letters)) {
      const seq = Number(JSON.parse(line).seq);
      letterSeqs.set(seq, (letterSeqs.get(seq) ?? 0) + 1);
    }
    /** @type {OnceReport} */
    const report = {
      rounds,
      brokerRestarts,
      published: site.ledger.size,
      acknowledged: 0,
      unknown: 0,
      stored: 0,
      lost: 0,
      duplicates: 0,
      strangers: 0,
      refusedAcknowledged: 0,
      deadLetters: letters.length,
      deadLetterCopies: 0,
      deadLettersLost: 0,
      idsKept,
      missing: [],
      twice: [],
    };
    for (const count of stored.values()) report.stored += count;
    for (const [key, outcome] of site.ledger) {
      if (outcome === 'ok') {
        report.acknowledged += 1;
        if (!stored.has(key)) {
          report.lost += 1;
          if (report.missing.length < 10) report.missing.push(key);
        }
      } else if (outcome === 'refused') {
        report.refusedAcknowledged += 1;
        if (!letterSeqs.has(Number(key.split('|')[1]))) report.deadLettersLost += 1;
      } else report.unknown += 1;
    }
    for (const [key, count] of stored) {
      if (!site.ledger.has(key)) report.strangers += 1;
      if (count > 1) {
        report.duplicates += count - 1;
        if (report.twice.length < 10) report.twice.push(key);
      }
    }
    for (const count of letterSeqs.values()) if (count > 1) report.deadLetterCopies += count - 1;
    return report;
  } finally {
    if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) {
      gateway.child.kill('SIGKILL');
      await gateway.exited;
    }
    await broker.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Messages the gateway at `url` took from the broker since it started (0 when it does not answer). @param {string} url */
async function received(url) {
  try {
    const status = /** @type {{ mqtt?: { subscription: { messages: number, copies: number } | null } }} */ (
      await (await fetch(`${url}/status`, { headers: { 'x-api-key': KEY } })).json()
    );
    return (status.mqtt?.subscription?.messages ?? 0) + (status.mqtt?.subscription?.copies ?? 0);
  } catch {
    return 0;
  }
}

/** Waits until the gateway at `url` has its subscription granted. @param {string} url */
async function granted(url) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = /** @type {{ mqtt?: { subscription: { grantedQos: number[] | null } | null } }} */ (
      await fetch(`${url}/status`, { headers: { 'x-api-key': KEY } })
        .then((response) => response.json())
        .catch(() => ({}))
    );
    if (status.mqtt?.subscription?.grantedQos != null) return;
    if (Date.now() > deadline) throw new Error('the gateway did not subscribe within 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Whether a report holds every promise: nothing lost, nothing twice, every refused message one dead letter. @param {OnceReport} r */
export const heldOnce = (r) =>
  r.acknowledged > 0 && r.lost === 0 && r.duplicates === 0 && r.strangers === 0 && r.deadLetterCopies === 0 && r.deadLettersLost === 0;

/** Readings by `ship|seq` and how often each is stored. @param {string} url @param {string} table */
async function storedSeqs(url, table) {
  const rows = (await sql(url, `SELECT ship_id, cast(value AS long) FROM "${table}" WHERE cargo_id = 'seq'`)).dataset;
  /** @type {Map<string, number>} */
  const stored = new Map();
  for (const [ship, seq] of rows) {
    const key = `${ship}|${seq}`;
    stored.set(key, (stored.get(key) ?? 0) + 1);
  }
  return stored;
}
