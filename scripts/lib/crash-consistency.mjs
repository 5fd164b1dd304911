// Crash consistency: sustained single and batch load against the gateway, killed with SIGKILL at
// random moments and restarted, many rounds. Afterwards every reading answered 2xx is in QuestDB
// exactly once, and no reading answered with an error is there.
//
// The data directory is a plain temporary directory (a process crash), or a `storage` that also
// loses what was not fsynced after each kill (a power cut, scripts/faults/power-cut.mjs).
//
// Run by test/crash-consistency.test.ts (a few rounds) and by scripts/faults/run.mjs (many).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGatewayProcess } from './gateway-process.mjs';
import { readTopic } from './kafka-topic.mjs';
import { sql, walApplied, waitForWalApplied } from './questdb-sql.mjs';

/** The gateway's exit status after a failed checkpoint of its queue (src/gateway.ts). */
const EXIT_QUEUE_SYNC_LOST = 74;
/** How often a round's gateway is started on a disk with I/O faults before the run gives up. */
const START_ATTEMPTS = 20;

const KEY = 'crash-test-key-0123456789';
/** The readings' times count nanoseconds from here; their keys are `ship|ns since BASE_NS`. */
export const BASE_NS = 1_780_000_000_000_000_000n;
const MIN_ANSWERS_PER_ROUND = 30;

/**
 * Where the gateway keeps its queue across the rounds.
 * @typedef {object} CrashStorage
 * @property {() => Promise<string>} open             the data directory for the next gateway run (again after a failed start)
 * @property {(random: () => number) => Promise<void>} afterKill  what happens to it once the gateway was killed
 * @property {() => Promise<void>} close              once the last gateway stopped: remove it
 *
 * @typedef {{ rounds: number, durability: 'power-loss' | 'process-crash', questdbUrl: string, bundlePath: string,
 *             clients?: number, seed?: number, storage?: CrashStorage, table?: string, log?: (line: string) => void,
 *             roundMs?: { min: number, max: number }, pauseMs?: number, gatewayEnv?: Record<string, string>,
 *             sinkEnv?: Record<string, string>, alsoStoredIn?: string[], gracefulStops?: number, ioFaults?: boolean,
 *             kafka?: CrashKafka, siteOfRound?: (round: number) => string, settled?: () => Promise<void>,
 *             duringRound?: (gateway: import('./gateway-process.mjs').GatewayProcess, env: Record<string, string>) => Promise<void> }} CrashOptions
 *   `roundMs`: how long a round runs before its kill, at random in between (default 100 to 800 ms);
 *   `pauseMs`: each client's pause between requests (default none), to keep long rounds' ledger small;
 *   `gatewayEnv`: further settings of every gateway run;
 *   `sinkEnv`: settings of further sinks (an upstream gateway, say); `alsoStoredIn`: the QuestDB tables
 *   those sinks deliver into, checked like the local one (the report's `destinations`);
 *   `settled`: awaited once the last gateway stopped, before the tables are read (a central
 *   gateway's queue drained);
 *   `siteOfRound`: each round's gateway (and the final one, round `rounds + 1`) runs under this
 *   SITE_ID, a rename at every restart: every reading must then be stored, in every table and Kafka
 *   message, under the site of the gateway that answered it (the report's `wrongSite`);
 *   `duringRound`: what else happens in each round while the load runs (a second gateway started
 *   on the same data directory, say), given the round's gateway and its settings; the kill waits for it;
 *   `gracefulStops`: the share of rounds that end with SIGTERM instead (the gateway closes its queue,
 *   and SQLite deletes its WAL files), followed by SIGKILL 0 to 2 s later if it is still closing;
 *   `ioFaults`: the disk fails writes or fsyncs now and then, so a 503 is an outcome the gateway
 *   cannot know (SQLite may have written a commit whose fsync failed) and counts as unanswered, and a
 *   gateway that exits while starting is started again, as systemd does;
 *   `kafka`: the Kafka sink's broker and topic (the gateway gets KAFKA_BROKERS and KAFKA_TOPIC): its
 *   messages are checked for every answered reading at least once (the report's `kafka`). With
 *   `killBroker` (a share of the rounds, 0 to 1), the broker is killed (-9) at a random moment of
 *   that share of the rounds, and started again once the round's gateway was killed.
 * @typedef {{ broker: import('./kafka.mjs').KafkaBroker, topic: string, killBroker?: number }} CrashKafka
 * @typedef {{ messages: number, missing: number, strangers: number, duplicates: number, brokerKills: number, wrongSite?: number }} KafkaReport
 *   `duplicates`: messages of a reading beyond its first (a request whose answer the kill took is sent again).
 * @typedef {{ rounds: number, ok: number, refused: number, unknown: number, stored: number,
 *             missing: string[], forbidden: string[], strangers: string[], duplicates: number, errorEvents: Record<string, number>,
 *             errorSamples: Record<string, string>,
 *             roundsWithLoss: number, lossWindowMs: number, destinations?: Record<string, DestinationReport>, startFailures?: number, longestStartFailures?: number, syncLostExits?: number, crashExits?: number,
 *             stops?: { closed: number, killedClosing: number }, kafka?: KafkaReport, wrongSite?: string[] }} CrashReport
 * @typedef {{ stored: number, missing: number, forbidden: number, strangers: number, duplicates: number, wrongSite?: number }} DestinationReport
 *   `lossWindowMs`: the longest time between a lost reading's 2xx answer and the kill of its round;
 *   `errorEvents`: how often each event the gateways logged as an error occurred, over all runs;
 *   `errorSamples`: the first such line's message (and its error's) for each event;
 *   `startFailures` (with `ioFaults`): how often a gateway exited while starting and was started again;
 *   `longestStartFailures`: the most starts that failed in a row;
 *   `syncLostExits` (with `ioFaults`): rounds whose gateway stopped itself (exit 74) after a checkpoint
 *   of its queue failed, ending the round early; `crashExits`: rounds whose gateway exited by itself otherwise;
 *   `stops` (with `gracefulStops`): how many rounds ended with the queue closed, or killed while closing;
 *   `wrongSite` (with `siteOfRound`): readings stored under another site than the one that answered them.
 */

/** A temporary directory that survives the kills whole, as the page cache does. @returns {CrashStorage} */
function processCrashStorage() {
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-crash-'));
  return {
    open: async () => dataDir,
    afterKill: async () => undefined,
    close: async () => rmSync(dataDir, { recursive: true, force: true }),
  };
}

/** A small deterministic PRNG so a failing run can be repeated with its seed. @param {number} seed */
export function prng(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** @param {CrashOptions} options @returns {Promise<CrashReport>} */
export async function runCrashConsistency(options) {
  const {
    rounds,
    durability,
    questdbUrl,
    bundlePath,
    clients = 6,
    seed = Date.now(),
    storage = processCrashStorage(),
    log = () => undefined,
    roundMs = { min: 100, max: 800 },
    pauseMs = 0,
    gatewayEnv = {},
    sinkEnv = {},
    alsoStoredIn = [],
    gracefulStops = 0,
    ioFaults = false,
    kafka,
    siteOfRound,
    settled,
  } = options;
  const random = prng(seed);
  const table = options.table ?? `crash_${durability.replace('-', '_')}_${process.pid}_${Math.floor(random() * 1e9)}`;
  const env = {
    DURABILITY: durability,
    QUESTDB_URL: questdbUrl,
    QUESTDB_TABLE: table,
    FLUSH_INTERVAL_MS: '20',
    FLUSH_BATCH_READINGS: '500',
    HEALTH_REPORT: 'false',
    RETENTION_DAYS: '0',
    ...gatewayEnv,
    ...sinkEnv,
    ...(kafka === undefined ? {} : { KAFKA_BROKERS: kafka.broker.bootstrap, KAFKA_TOPIC: kafka.topic }),
  };
  let brokerKills = 0;
  /** @type {Map<string, 'ok' | 'error' | 'unknown'>} */
  const ledger = new Map();
  /** With `siteOfRound`: the site of the gateway each reading was sent to. @type {Map<string, string>} */
  const sentAs = new Map();
  /** When each reading was answered 2xx and in which round, for the loss window. @type {Map<string, { at: number, round: number }>} */
  const answeredAt = new Map();
  /** @type {number[]} */
  const killedAt = [];
  let sequence = 0n;
  let requests = 0;
  /** @type {Record<string, number>} */
  const errorEvents = {};
  /** The first error message of each event, to tell why without the gateways' logs. @type {Record<string, string>} */
  const errorSamples = {};
  const tallyErrors = (/** @type {import('./gateway-process.mjs').GatewayProcess} */ gateway) => {
    for (const line of gateway.logs) {
      if (Number(line.level) < 50) continue;
      const event = String(line.event);
      errorEvents[event] = (errorEvents[event] ?? 0) + 1;
      const err = /** @type {{ message?: string } | undefined} */ (line.err);
      errorSamples[event] ??= `${String(line.msg ?? '')}${err?.message === undefined ? '' : `: ${err.message}`}`.slice(0, 300);
    }
  };
  /**
   * Starts a gateway on the storage; with `ioFaults`, up to START_ATTEMPTS times, as systemd would
   * go on. A start maps the queue's shared-memory index afresh three times (the format check twice,
   * then the writer), each a few writes that grow a file: under `enospc` about 38 % of starts fail,
   * now and then several in a row.
   */
  /** The settings of the gateway started last. @type {Record<string, string>} */
  let startedEnv = {};
  const start = async (/** @type {number} */ round) => {
    for (let attempt = 1; ; attempt++) {
      try {
        startedEnv = {
          API_KEY: KEY,
          DATA_DIR: await storage.open(),
          ...env,
          ...(siteOfRound === undefined ? {} : { SITE_ID: siteOfRound(round) }),
        };
        return await startGatewayProcess({ bundle: bundlePath, env: startedEnv });
      } catch (error) {
        if (!ioFaults || attempt === START_ATTEMPTS) throw error;
        startFailures += 1;
        longestStartFailures = Math.max(longestStartFailures, attempt);
      }
    }
  };
  let startFailures = 0;
  let longestStartFailures = 0;
  /** Rounds whose gateway exited after a failed checkpoint, or otherwise by itself (with `ioFaults`). */
  let syncLostExits = 0;
  let crashExits = 0;
  /** Rounds that ended with SIGTERM: closed, or killed while closing. */
  const stops = { closed: 0, killedClosing: 0 };
  log(`crash consistency: ${rounds} rounds, ${durability}, seed ${seed}, table ${table}`);
  /** The gateway that drains the queue at the end; stopped before the storage goes, whatever failed. @type {import('./gateway-process.mjs').GatewayProcess | undefined} */
  let final;

  try {
    for (let round = 1; round <= rounds; round++) {
      const gateway = await start(round);
      const site = siteOfRound?.(round);
      const besides = options.duringRound?.(gateway, startedEnv) ?? Promise.resolve();
      let alive = true;
      let answered = 0;
      const client = async (/** @type {number} */ id) => {
        while (alive) {
          const size = random() < 0.4 ? 1 : 1 + Math.floor(random() * 60);
          // Every 12th request carries one bad reading: the whole batch must be refused.
          const poisoned = ++requests % 12 === 0;
          const readings = Array.from({ length: size }, () => {
            sequence += 1n;
            return { time: `${sequence}`, ship_id: `device-${id}`, cargo_id: 'seq', value: Number(sequence) };
          });
          const keys = readings.map((r) => `${r.ship_id}|${r.time}`);
          const body = readings.map((r) => ({ ...r, time: isoOf(BASE_NS + BigInt(r.time)) }));
          const victim = body[Math.floor(random() * body.length)];
          if (poisoned && victim) victim.value = /** @type {any} */ ('not a number');
          const single = size === 1 && random() < 0.5;
          let outcome;
          try {
            const response = await fetch(`${gateway.url}/api/v2/ingest${single ? '/' : '/batch'}`, {
              method: 'POST',
              headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
              body: JSON.stringify(single ? body[0] : body),
            });
            await response.arrayBuffer();
            outcome = response.status >= 200 && response.status < 300 ? 'ok' : ioFaults && response.status === 503 ? 'unknown' : 'error';
          } catch {
            outcome = 'unknown';
          }
          if (outcome !== 'unknown') answered += 1;
          const at = Date.now();
          for (const key of keys) {
            ledger.set(key, /** @type {'ok' | 'error' | 'unknown'} */ (outcome));
            if (site !== undefined) sentAs.set(key, site);
            if (outcome === 'ok') answeredAt.set(key, { at, round });
          }
          if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
        }
      };
      const load = Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
      // A random moment, but not before the round carried real load, however slow the machine.
      const roundStart = Date.now();
      const killAt = roundStart + roundMs.min + random() * (roundMs.max - roundMs.min);
      // The broker dies too, in that share of the rounds, somewhere before the gateway.
      const brokerDiesAt = random() < (kafka?.killBroker ?? 0) ? roundStart + random() * (killAt - roundStart) : undefined;
      let brokerDied = false;
      const killBroker = () => {
        const pid = kafka?.broker.pid();
        if (pid !== undefined) process.kill(pid, 'SIGKILL');
        brokerDied = true;
        brokerKills += 1;
      };
      /** @type {{ code: number | null, signal: NodeJS.Signals | null } | undefined} */
      let exitedItself;
      void gateway.exited.then((exit) => {
        exitedItself ??= exit;
      });
      while ((Date.now() < killAt || answered < MIN_ANSWERS_PER_ROUND) && exitedItself === undefined) {
        if (brokerDiesAt !== undefined && !brokerDied && Date.now() >= brokerDiesAt) killBroker();
        await new Promise((r) => setTimeout(r, 5));
      }
      // A gateway stops itself only when a checkpoint of its queue failed on a failing disk (exit
      // 74): the round ends there, as systemd would start it again.
      // Any other exit on such a disk is counted, with its last lines in `errorSamples`.
      if (exitedItself !== undefined) {
        if (!ioFaults) {
          throw new Error(
            `round ${round}: the gateway exited by itself (${exitedItself.code ?? exitedItself.signal}): ${gateway.stderr()}`,
          );
        }
        if (exitedItself.code === EXIT_QUEUE_SYNC_LOST) syncLostExits += 1;
        else crashExits += 1;
      }
      // A busy machine's timers can sleep past both moments: the broker still dies before the gateway.
      if (brokerDiesAt !== undefined && !brokerDied) killBroker();
      await besides;
      if (exitedItself !== undefined) {
        // Nothing to stop.
      } else if (gracefulStops > 0 && random() < gracefulStops) {
        gateway.child.kill('SIGTERM');
        const kill = setTimeout(() => gateway.child.kill('SIGKILL'), random() * 2000);
        const { signal } = await gateway.exited;
        clearTimeout(kill);
        stops[signal === 'SIGKILL' ? 'killedClosing' : 'closed'] += 1;
      } else {
        gateway.child.kill('SIGKILL');
      }
      killedAt[round] = Date.now();
      await gateway.exited;
      tallyErrors(gateway);
      alive = false;
      await load;
      if (brokerDied) await kafka?.broker.start();
      await storage.afterKill(random);
      log(`round ${round}: ${ledger.size} readings sent so far`);
    }

    final = await start(rounds + 1);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const status = /** @type {{ queue: { readings: number }, sinks: { name: string, backlog: number }[] }} */ (
        await (await fetch(`${final.url}/status`, { headers: { 'x-api-key': KEY } })).json()
      );
      if (status.queue.readings === 0 && status.sinks.every((s) => s.backlog === 0)) break;
      if (Date.now() > deadline) {
        const backlogs = status.sinks.map((s) => `${s.name} ${s.backlog}`).join(', ');
        const problems = final.logs.filter((line) => Number(line.level) >= 40).slice(-5);
        throw new Error(
          `queue did not drain: ${status.queue.readings} readings left (${backlogs}); last warnings: ${JSON.stringify(problems)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    // The gateway keeps checking its table while it runs: a QuestDB that comes back from a cut may
    // suspend the table a while after it first answered, and the gateway resumes it and sends its
    // kept readings again. Give it that time, as a running site would.
    await walApplied(questdbUrl, table, 60_000);
    final.child.kill('SIGTERM');
    await final.exited;
    tallyErrors(final);
    await settled?.();
    await waitForWalApplied(questdbUrl, table, 30_000);

    const stored = await storedKeys(questdbUrl, table);
    /** Keys stored under another site than the one they were sent to (with `siteOfRound`). */
    const wrongSites = async (/** @type {string} */ of) => {
      if (siteOfRound === undefined) return undefined;
      const wrong = [];
      for (const [key, sites] of await storedSites(questdbUrl, of)) if (sites.some((site) => site !== sentAs.get(key))) wrong.push(key);
      return wrong;
    };
    let storedRows = 0;
    for (const count of stored.values()) storedRows += count;
    /** @type {CrashReport} */
    const report = {
      rounds,
      ok: 0,
      refused: 0,
      unknown: 0,
      stored: storedRows,
      missing: /** @type {string[]} */ ([]),
      forbidden: /** @type {string[]} */ ([]),
      strangers: /** @type {string[]} */ ([]),
      duplicates: 0,
      roundsWithLoss: 0,
      lossWindowMs: 0,
      errorEvents,
      errorSamples,
      ...(ioFaults ? { startFailures, longestStartFailures, syncLostExits, crashExits } : {}),
      ...(gracefulStops > 0 ? { stops } : {}),
    };
    const wrongSite = await wrongSites(table);
    if (wrongSite !== undefined) report.wrongSite = wrongSite;
    for (const [key, outcome] of ledger) {
      if (outcome === 'ok') {
        report.ok += 1;
        if (!stored.has(key)) report.missing.push(key);
      } else if (outcome === 'error') {
        report.refused += 1;
        if (stored.has(key)) report.forbidden.push(key);
      } else {
        report.unknown += 1;
      }
    }
    const lossRounds = new Set();
    for (const key of report.missing) {
      const answer = answeredAt.get(key);
      if (answer === undefined) continue;
      lossRounds.add(answer.round);
      report.lossWindowMs = Math.max(report.lossWindowMs, /** @type {number} */ (killedAt[answer.round]) - answer.at);
    }
    report.roundsWithLoss = lossRounds.size;
    for (const [key, count] of stored) {
      if (!ledger.has(key)) report.strangers.push(key);
      if (count > 1) report.duplicates += count - 1;
    }
    log(`stored ${report.stored}: ${report.ok} answered 2xx, ${report.refused} refused, ${report.unknown} unanswered (killed mid-request)`);
    if (alsoStoredIn.length > 0) {
      report.destinations = {};
      for (const other of alsoStoredIn) {
        await waitForWalApplied(questdbUrl, other, 30_000);
        const found = await storedKeys(questdbUrl, other);
        const destination = { stored: 0, missing: 0, forbidden: 0, strangers: 0, duplicates: 0 };
        for (const count of found.values()) destination.stored += count;
        for (const [key, outcome] of ledger) {
          if (outcome === 'ok' && !found.has(key)) destination.missing += 1;
          if (outcome === 'error' && found.has(key)) destination.forbidden += 1;
        }
        for (const [key, count] of found) {
          if (!ledger.has(key)) destination.strangers += 1;
          if (count > 1) destination.duplicates += count - 1;
        }
        const wrong = await wrongSites(other);
        report.destinations[other] = wrong === undefined ? destination : { ...destination, wrongSite: wrong.length };
        log(
          `${other}: stored ${destination.stored}, missing ${destination.missing}, duplicates ${destination.duplicates}${wrong === undefined ? '' : `, under another site ${wrong.length}`}`,
        );
      }
    }
    if (kafka !== undefined) {
      const seen = new Map();
      let kafkaWrongSite = 0;
      const messages = await readTopic(kafka.broker.bootstrap, kafka.topic);
      for (const message of messages) {
        const reading = JSON.parse(message.value);
        const key = `${reading.ship_id}|${nsOf(reading.time) - BASE_NS}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
        if (siteOfRound !== undefined && reading.site !== sentAs.get(key)) kafkaWrongSite += 1;
      }
      /** @type {KafkaReport} */
      const kafkaReport = { messages: messages.length, missing: 0, strangers: 0, duplicates: 0, brokerKills };
      if (siteOfRound !== undefined) kafkaReport.wrongSite = kafkaWrongSite;
      for (const [key, outcome] of ledger) if (outcome === 'ok' && !seen.has(key)) kafkaReport.missing += 1;
      for (const [key, count] of seen) {
        if (!ledger.has(key) || ledger.get(key) === 'error') kafkaReport.strangers += 1;
        kafkaReport.duplicates += count - 1;
      }
      report.kafka = kafkaReport;
      log(
        `Kafka ${kafka.topic}: ${messages.length} messages, missing ${kafkaReport.missing}, duplicates ${kafkaReport.duplicates}, broker killed ${brokerKills} times`,
      );
    }
    return report;
  } finally {
    if (final && final.child.exitCode === null && final.child.signalCode === null) {
      final.child.kill('SIGKILL');
      await final.exited;
    }
    await storage.close();
  }
}

/** How often each reading key (`ship|ns after BASE_NS`) is in a table. @param {string} url @param {string} table @returns {Promise<Map<string, number>>} */
export async function storedKeys(url, table) {
  const rows = (await sql(url, `SELECT ship_id, cast(cast(time AS long) - ${BASE_NS} AS string) FROM "${table}"`)).dataset;
  const stored = new Map();
  for (const [ship, offset] of rows) {
    const key = `${ship}|${offset}`;
    stored.set(key, (stored.get(key) ?? 0) + 1);
  }
  return stored;
}

/** The sites each reading key (`ship|ns after BASE_NS`) is stored under in a table, a site per row. @param {string} url @param {string} table @returns {Promise<Map<string, string[]>>} */
export async function storedSites(url, table) {
  const rows = (await sql(url, `SELECT ship_id, cast(cast(time AS long) - ${BASE_NS} AS string), site FROM "${table}"`)).dataset;
  const stored = new Map();
  for (const [ship, offset, site] of rows) {
    const key = `${ship}|${offset}`;
    stored.set(key, [...(stored.get(key) ?? []), site]);
  }
  return stored;
}

/** An epoch in ns from RFC 3339 with nine fraction digits, as the Kafka sink writes times. @param {string} iso */
function nsOf(iso) {
  const [whole, fraction = ''] = iso.replace(/Z$/, '').split('.');
  return BigInt(Date.parse(`${whole}Z`) / 1000) * 1_000_000_000n + BigInt(fraction.padEnd(9, '0'));
}

/** RFC 3339 with nanoseconds for an epoch in ns. @param {bigint} ns */
export function isoOf(ns) {
  const seconds = ns / 1_000_000_000n;
  const fraction = String(ns % 1_000_000_000n).padStart(9, '0');
  return `${new Date(Number(seconds) * 1000).toISOString().slice(0, 19)}.${fraction}Z`;
}
