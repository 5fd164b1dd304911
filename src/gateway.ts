import { setMaxListeners } from 'node:events';
import cron, { type ScheduledTask } from 'node-cron';
import type { Hono } from 'hono';
import type { Logger } from 'pino';
import type { Config } from './config/config.js';
import { siteFallbackNotice } from './config/site-name.js';
import { DeliveryThread } from './sinks/delivery-thread.js';
import { sinkSpecs } from './sinks/sink-specs.js';
import { boundSummaries, isSummaryRule, SUMMARY_SUFFIX_CHARS } from './sinks/thinning/thinning-rules.js';
import { formatDailyWindows } from './config/daily-windows.js';
import type { QuestDbSinkSpec, SinkSpec } from './sinks/registry.js';
import { QuestDbHttp } from './questdb/questdb-http.js';
import { createApp } from './http/app.js';
import { startHttpServer, type HttpServer } from './http/server.js';
import { loadServerCertificate, type CertificateLocation, type ServerCertificate } from './tls/certificate-store.js';
import { queuePath } from './queue/queue-file.js';
import { ownDataDir, type DataDirLock } from './queue/data-dir-lock.js';
import { assertReadableFormat } from './queue/queue-format.js';
import { QueueWriter } from './queue/queue-writer.js';
import { readingSchema } from './reading/reading-schema.js';
import { TimeWindow } from './reading/time-window.js';
import { ReceiveClock } from './reading/receive-clock.js';
import type { Catalogue } from './catalogue/catalogue.js';
import { CatalogueStore } from './catalogue/catalogue-store.js';
import { HealthLifecycle, within } from './health/health-lifecycle.js';
import { HealthReporter } from './health/health-reporter.js';
import { createFleetSinkTable, createFleetSiteTable, FleetRecorder } from './health/fleet-rows.js';
import type { FleetDestination, FleetReporter } from './health/fleet-reporter.js';
import { REMOTE_QUESTDB_SINK, remoteQuestDbSpec } from './sinks/remote-questdb/remote-questdb-spec.js';
import { setUpTable } from './sinks/questdb/table-setup.js';
import { takeSnapshot, type GatewaySnapshot, type SinkDescription } from './health/snapshot.js';
import { SystemdNotifier } from './health/systemd-notify.js';
import { KeyStore } from './keys/key-store.js';
import { ConnectionGate } from './http/connection-gate.js';
import { keysAppliedPath } from './keys/keys-applied.js';
import { FailureDelay } from './http/middleware/api-key/failure-delay.js';
import { IdempotencyKeys, idempotencyFile } from './http/idempotency-keys.js';
import { GatewayStats, type GatewayParts } from './stats.js';
import type { ReadingsStore } from './console/cargo-history.js';
import type { ConsoleDeps, GatewayConsole } from './console/gateway-console.js';
import type { UpdateInstaller } from './console/update-bundle.js';
import { AuditTrail } from './audit/audit-trail.js';
import { VERSION } from './version.js';
import { InflightBudget } from './http/inflight-budget.js';
import { readBoard } from './identity/board.js';
import { type Instance, type InstanceOrigin, loadInstance } from './identity/instance.js';
import { type ClaimEvent, SiteClaims } from './claims/site-claims.js';
import type { MqttDeps, RunningMqtt } from './mqtt/start-mqtt.js';

export interface Gateway {
  readonly port: number;
  readonly httpsPort: number;
  /** MQTT's ports, when `MQTT=on`. */
  readonly mqttPort: number | undefined;
  readonly mqttTlsPort: number | undefined;
  readonly url: string;
  /** Re-reads the certificate (SIGHUP); on failure keeps serving the current one and throws. */
  reloadCertificate(): ServerCertificate;
  readonly queue: QueueWriter;
  readonly stats: GatewayStats;
  readonly keys: KeyStore;
  /** The site's catalogue of ship and cargo ids; `reload()` re-reads it (SIGHUP). */
  readonly catalogue: CatalogueStore;
  /** The audit trail; `tick()` writes what it gathered and reads what other processes wrote. */
  readonly audit: AuditTrail;
  /** Graceful stop: refuse new work, finish in-flight requests, last flush, the last health row, close the queue. */
  stop(cause?: StopCause): Promise<void>;
}

/** Delivery requests are bounded in bytes too, so a backlog of long ids cannot build a huge request. */
const BATCH_BYTES = 16 * 1024 * 1024;
/**
 * How long a start waits for QuestDB to take the dashboards' tables: long enough for a board under
 * load to create a dozen tables, short enough that a QuestDB that does not answer holds up little.
 */
const DASHBOARD_TABLES_WAIT_MS = 5000;
/** How often the catalogue file is checked for changes. */
const CATALOGUE_POLL_MS = 2000;

/** What asked the gateway to stop, for the reason its last health row gives. */
export interface StopCause {
  signal?: NodeJS.Signals;
}

export interface GatewayOptions {
  /**
   * The script the delivery thread runs: the gateway bundle's entry, which starts the sinks when it
   * finds itself in a worker thread (this module is a chunk of the bundle, not its entry). Tests
   * that run the sources pass the built bundle.
   */
  deliveryScript: URL | string;
  /** The environment the configuration was loaded from, for the console's settings page; `process.env` by default. */
  env?: Record<string, string | undefined>;
  /** What takes update bundles uploaded in the console; by default the system's (the appliance's), if it has one. */
  updateInstaller?: UpdateInstaller;
}

/**
 * Starts the gateway: one step after another, each a named function below. The order matters:
 * nothing is written before the queue file's format is known to be readable, and the servers listen
 * only once everything they answer from is open.
 */
export async function startGateway(config: Config, logger: Logger, options: GatewayOptions): Promise<Gateway> {
  // A queue file from a newer release is refused before anything is written, the certificate included.
  assertReadableFormat(queuePath(config.dataDir));
  // Then nothing is written before this process owns the data directory: a second gateway stops here.
  const owner = await ownDataDir(config.dataDir);
  try {
    return await startOwned(config, logger, options, owner);
  } catch (error) {
    owner.release();
    throw error;
  }
}

async function startOwned(config: Config, logger: Logger, options: GatewayOptions, owner: DataDirLock): Promise<Gateway> {
  const startedAt = Date.now();
  const certificateLocation = certificateLocationOf(config);
  // Before the queue opens: a bad certificate file stops the start with its own message.
  let certificate = loadServerCertificate(certificateLocation);
  // Made at the first start, and anew on another board: what forwarded readings are told apart by.
  const instance = gatewayInstance(config, logger);
  const sinks = sinkSpecs(config, instance.id);
  const sinkDescriptions = sinks.map((s) => ({
    name: s.name,
    destination: s.describe,
    policy: s.policy,
    flushIntervalMs: s.flushIntervalMs,
    ...((s.maxBytesPerS ?? 0) > 0 ? { budgetBytesPerS: s.maxBytesPerS! } : {}),
    ...((s.maxBytesPerS ?? 0) > 0 && s.cheapHours !== undefined ? { budgetCheapHours: formatDailyWindows(s.cheapHours) } : {}),
  }));
  // Before anything else that can fail, and before the gateway answers anyone: the dashboards and
  // alert rules then find empty tables rather than none. A QuestDB that does not answer within the
  // wait holds up nothing: the reports, the catalogue and the sinks create them later.
  const questdb = healthQuestDb(sinks);
  const health = healthLifecycle(config, questdb, logger, startedAt);
  const catalogue = new CatalogueStore({
    path: config.catalogueFile,
    pollMs: CATALOGUE_POLL_MS,
    gateway: config.gatewayName,
    site: config.siteId,
    questdb: health === undefined ? undefined : questdb,
    logger,
  });
  const tablesReady = dashboardTables(sinks, questdb, health, catalogue);
  await within(tablesReady, DASHBOARD_TABLES_WAIT_MS);
  const queue = openQueue(config, sinks, logger);
  health?.recordStart();
  const stats = new GatewayStats();
  // The thinning rules the catalogue has at the start: the sinks keep them for their run.
  await catalogue.whenRead();
  const thinning = boundSummaries(catalogue.catalogue.thinning, config.maxIdLength);
  if (config.maxIdLength <= SUMMARY_SUFFIX_CHARS && thinning.some(isSummaryRule)) {
    logger.warn(
      { event: 'summary_rules_unused', maxIdLength: config.maxIdLength },
      `MAX_ID_LENGTH ${config.maxIdLength} leaves no cargo id room for a summary's ":count": every summary rule is passed over`,
    );
  }
  const delivery = deliveryThread(config, sinks, queue, stats, logger, options, thinning);
  const stopping = stopControl();
  const failureDelay = new FailureDelay(config.authFailureDelayMaxMs, config.authFailureWindowS * 1000);
  const keys = new KeyStore({
    defaultKey: config.apiKey,
    path: config.apiKeysFile,
    pollMs: config.apiKeysPollMs,
    logger,
    appliedFile: keysAppliedPath(config.dataDir),
  });
  const fleetRecorder = questdb === undefined ? undefined : new FleetRecorder(questdb);
  const audit = new AuditTrail({ dataDir: config.dataDir, logger });
  const claims = siteClaims(config, instance, logger);
  const identity = { site: config.siteId, instance: instance.id };
  // What the console and the health snapshot both read.
  const facts = {
    queue,
    stats,
    keys,
    failureDelay,
    isStopping: stopping.isStopping,
    version: VERSION,
    sinks: sinkDescriptions,
    identity,
    siteClaims: () => claims.view(),
  };
  const gatewayConsole = await consoleWhenOn(config, {
    ...facts,
    certificate: () => ({ ...tlsSummary(certificate), subjectAltName: certificate.subjectAltName, pem: certificate.cert }),
    delivery,
    password: config.consolePassword,
    metricsToken: config.metricsToken,
    loginAttemptsPerMinute: config.loginAttemptsPerMinute,
    releaseSiteClaim: (site) => claims.release(site),
    env: options.env ?? process.env,
    audit,
    ...(options.updateInstaller === undefined ? {} : { updateInstaller: options.updateInstaller }),
    catalogue,
    logger,
    listenHost: config.host,
    readings: readingsStore(config, sinks),
  });
  const idempotency = idempotencyKeys(config, logger);
  // One clock and one byte budget for HTTP and MQTT: receive times stay distinct across both.
  const clock = receiveClock(queue, logger);
  const inflight = new InflightBudget(config.maxInflightBytes);
  const validator = validatorOf(config);
  // Made before the app, whose API-key check tells it which connections are devices'.
  const gate = new ConnectionGate(
    {
      maxConnections: config.maxConnections,
      maxUnproven: config.maxUnprovenConnections,
      // Never looser than the headers' own bound; at that bound, just after it, so Node's 408 goes first.
      unprovenTimeoutMs: config.unprovenTimeoutMs < config.headersTimeoutMs ? config.unprovenTimeoutMs : config.headersTimeoutMs * 1.5,
    },
    logger,
  );
  const app = createApp({
    gate,
    queue,
    clock,
    inflight,
    stats,
    validator,
    logger,
    keys,
    failureDelay,
    maxBodyBytes: config.maxBodyBytes,
    maxInflightBytes: config.maxInflightBytes,
    maxBatchReadings: config.maxBatchReadings,
    harborId: config.harborId,
    siteId: config.siteId,
    isStopping: stopping.isStopping,
    stopping: stopping.signal,
    version: VERSION,
    tls: () => tlsSummary(certificate),
    sinks: sinkDescriptions,
    console: gatewayConsole,
    idempotency,
    identity,
    siteClaims: () => claims.view(),
    claims,
    recordFleetReport: fleetRecorder === undefined ? undefined : (report, receivedMs) => fleetRecorder.record(report, receivedMs),
  });
  const http = await listen(app, config, certificate, queue, gate).catch(async (error: unknown) => {
    // A gateway that keeps failing to start still leaves the tables, and says why it stopped.
    await within(Promise.all([tablesReady, health?.failedStart((error as Error).message)]), DASHBOARD_TABLES_WAIT_MS);
    await questdb?.close();
    audit.close();
    throw error;
  });
  const mqtt = await startMqttWhenOn(config, logger, {
    certificate,
    gate: http.gate,
    budget: inflight,
    queue,
    clock,
    stats,
    keys,
    failureDelay,
    validator,
    stopping: stopping.signal,
    ...(gatewayConsole === undefined ? {} : { accepted: gatewayConsole.accepted.bind(gatewayConsole) }),
    onFailure: async () => {
      await http.close(Date.now());
      await questdb?.close();
      audit.close();
      queue.close();
    },
  });
  gatewayConsole?.start(http.httpsPort);
  audit.start();
  delivery.start();
  keys.watch();
  catalogue.watch();
  const fleet = await fleetReporting(config, questdb, identity, logger);
  const snapshot = () => takeSnapshot({ ...facts, idempotency });
  const housekeeping = scheduleHousekeeping(config, queue, { health, fleet, catalogue, snapshot, claims, fleetRecorder });
  const systemd = await notifySystemdReady(config, http, queue, logger);
  stats.parts = partsOf(config, fleet);
  logStarted(config, logger, { http, queue, certificate, sinks: sinkDescriptions, instance: instance.id, parts: stats.parts });

  // Everything a graceful stop (stopInOrder) closes.
  const running: Running = {
    stopping,
    systemd,
    housekeeping,
    keys,
    catalogue,
    http,
    mqtt,
    delivery,
    questdb,
    fleet,
    queue,
    owner,
    idempotency,
    claims,
    health,
    snapshot,
    audit,
    console: gatewayConsole,
  };
  let stopped: Promise<void> | undefined;
  const stop = (cause: StopCause = {}): Promise<void> => (stopped ??= stopInOrder(config, logger, running, cause));

  const reloadCertificate = (): ServerCertificate => {
    const next = loadServerCertificate(certificateLocation);
    http.setCertificate(next);
    mqtt?.setCertificate(next);
    certificate = next;
    logger.info({ event: 'certificate_reloaded', tls: tlsSummary(certificate) }, 'TLS certificate re-read');
    return certificate;
  };

  return {
    port: http.port,
    httpsPort: http.httpsPort,
    mqttPort: mqtt?.port,
    mqttTlsPort: mqtt?.tlsPort,
    reloadCertificate,
    url: `http://${config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host}:${http.port}`,
    queue,
    stats,
    keys,
    catalogue,
    audit,
    stop,
  };
}

interface Running {
  stopping: StopControl;
  systemd: SystemdNotifier | undefined;
  housekeeping: ScheduledTask;
  keys: KeyStore;
  catalogue: CatalogueStore;
  http: HttpServer;
  mqtt: RunningMqtt | undefined;
  delivery: DeliveryThread;
  questdb: QuestDbHttp | undefined;
  fleet: FleetReporting | undefined;
  queue: QueueWriter;
  owner: DataDirLock;
  idempotency: IdempotencyKeys;
  claims: SiteClaims;
  health: HealthLifecycle | undefined;
  snapshot: () => GatewaySnapshot;
  audit: AuditTrail;
  console: GatewayConsole | undefined;
}

/** Graceful stop: refuse new work, finish in-flight requests, let the sinks drain until the deadline, close the queue. */
async function stopInOrder(config: Config, logger: Logger, running: Running, cause: StopCause): Promise<void> {
  const { stopping, systemd, http, mqtt, delivery, queue } = running;
  stopping.begin();
  const deadline = Date.now() + config.shutdownTimeoutMs;
  await systemd?.stopping();
  await running.housekeeping.destroy();
  running.keys.stop();
  running.catalogue.stop();
  logger.info({ event: 'stopping', timeoutMs: config.shutdownTimeoutMs }, 'stopping: refusing new requests');
  await Promise.all([http.close(deadline), mqtt?.stop(deadline)]);
  // No console request is left to record anything: what the trail gathered is written.
  running.audit.close();
  saveIdempotencyKeys(config, logger, running.idempotency);
  running.claims.close();
  await running.console?.stop();
  await delivery.stop(deadline);
  await running.health?.stopped(running.snapshot, cause.signal, deadline);
  await running.questdb?.close();
  await running.fleet?.close();
  if (!queue.close())
    logger.warn({ event: 'checkpoint_failed' }, 'could not checkpoint the queue (disk full?); its WAL is replayed at the next start');
  running.owner.release();
  logger.info({ event: 'stopped', queued: queue.stats().readings }, 'stopped; queue closed');
}

/** The console and `/metrics`, loaded only when `CONSOLE` is on. */
async function consoleWhenOn(config: Config, deps: ConsoleDeps): Promise<GatewayConsole | undefined> {
  if (!config.console) return undefined;
  const { GatewayConsole } = await import('./console/gateway-console.js');
  return new GatewayConsole(deps);
}

/** The schema of record and its fast twin, judging reading times by one window. */
function validatorOf(config: Config) {
  const limits = { maxIdLength: config.maxIdLength, window: new TimeWindow(config.readingTimes) };
  return { schema: readingSchema(limits), limits };
}

/** This gateway's instance, made at its first start; a new one on another board is said loudly. */
function gatewayInstance(config: Config, logger: Logger): Instance {
  const board = readBoard();
  const { instance, origin } = loadInstance(config.dataDir, board);
  logInstance(logger, config, instance, origin, board?.source);
  return instance;
}

function logInstance(logger: Logger, config: Config, instance: Instance, origin: InstanceOrigin, boardSource: string | undefined): void {
  const fields = { event: 'instance', instance: instance.id, site: config.siteId, board: boardSource ?? null };
  if (origin.kind === 'renewed') {
    logger.warn(
      { ...fields, event: 'instance_renewed', previous: origin.previous },
      `this data directory was made on another board (a cloned or moved card): it is instance ${instance.id} now, not ${origin.previous}. ` +
        'A centre that knew the old instance under this site id refuses this one until the site is renamed (SITE_ID) or the claim released there',
    );
  } else if (origin.kind === 'made') {
    logger.info(
      fields,
      origin.reason === 'first start' ? 'gateway instance made' : 'gateway instance file unreadable; a new instance made',
    );
  }
}

const DAY_MS = 86_400_000;

/** The claims of the sites gateways forward here (a centre), this gateway's own site its own; the file is made with the first claim. */
function siteClaims(config: Config, instance: Instance, logger: Logger): SiteClaims {
  return new SiteClaims({
    dataDir: config.dataDir,
    expiryMs: config.siteClaimExpiryDays * DAY_MS,
    own: { site: config.siteId, instance: instance.id, gateway: config.gatewayName },
    onEvent: (event) => logClaimEvent(logger, event),
  });
}

function logClaimEvent(logger: Logger, event: ClaimEvent): void {
  const who = (claim: { instance: string; gateway: string | null }) =>
    `instance ${claim.instance}${claim.gateway === null ? '' : ` (gateway ${JSON.stringify(claim.gateway)})`}`;
  switch (event.kind) {
    case 'claimed':
      if (event.took === undefined) {
        logger.info(
          { event: 'site_claimed', site: event.claim.site, instance: event.claim.instance },
          `site ${JSON.stringify(event.claim.site)} claimed by ${who(event.claim)}`,
        );
      } else {
        logger.warn(
          {
            event: 'site_claim_taken',
            site: event.claim.site,
            instance: event.claim.instance,
            previous: event.took.instance,
            lastHeard: new Date(event.took.lastMs).toISOString(),
          },
          `site ${JSON.stringify(event.claim.site)} now belongs to ${who(event.claim)}; ${who(event.took)} had it, last heard ${new Date(event.took.lastMs).toISOString()}`,
        );
      }
      return;
    case 'refused':
      logger.error(
        { event: 'site_claim_conflict', site: event.conflict.site, owner: event.owner.instance, claimant: event.conflict.instance },
        `two gateways forward under site ${JSON.stringify(event.conflict.site)}: ${who(event.owner)} owns it, ${who(event.conflict)} is refused (409 site_claimed). ` +
          `Rename one (SITE_ID), or release the claim: harbor-gateway site-claims release ${JSON.stringify(event.conflict.site)}`,
      );
      return;
    case 'released':
      logger.warn(
        { event: 'site_claim_released', site: event.claim.site, instance: event.claim.instance },
        `claim of site ${JSON.stringify(event.claim.site)} by ${who(event.claim)} released: the next gateway that forwards under it owns it`,
      );
      return;
  }
}

/** How long an `Idempotency-Key` is honoured, and how many are held at most (a few MB). */
const IDEMPOTENCY_WINDOW_MS = 10 * 60 * 1000;
const IDEMPOTENCY_MAX_KEYS = 20_000;

/** The keys the last graceful stop saved, read back. */
function idempotencyKeys(config: Config, logger: Logger): IdempotencyKeys {
  const keys = new IdempotencyKeys({ windowMs: IDEMPOTENCY_WINDOW_MS, maxKeys: IDEMPOTENCY_MAX_KEYS });
  const loaded = keys.load(idempotencyFile(config.dataDir));
  if (loaded > 0) logger.info({ event: 'idempotency_keys_loaded', keys: loaded }, 'Idempotency-Keys of the last run read back');
  return keys;
}

/** Once no request is in flight: the answered keys still in their window, for the next start. */
function saveIdempotencyKeys(config: Config, logger: Logger, keys: IdempotencyKeys): void {
  if (keys.size === 0) return;
  try {
    keys.save(idempotencyFile(config.dataDir));
  } catch (error) {
    logger.warn({ event: 'idempotency_keys_not_saved', err: error }, 'could not save the Idempotency-Keys; the next start forgets them');
  }
}

function certificateLocationOf(config: Config): CertificateLocation {
  return {
    certFile: config.tlsCertFile,
    keyFile: config.tlsKeyFile,
    credentialsDirectory: process.env['CREDENTIALS_DIRECTORY'],
    dataDir: config.dataDir,
  };
}

/** Exit status after a failed checkpoint of the queue file (EX_IOERR); systemd starts the gateway again. */
export const EXIT_QUEUE_SYNC_LOST = 74;

/** Opens the queue for the configured sinks and logs the sinks it added or let go since the last start. */
function openQueue(config: Config, sinks: readonly SinkSpec[], logger: Logger): QueueWriter {
  const queue = QueueWriter.open({
    dataDir: config.dataDir,
    durability: config.durability,
    maxBytes: config.queueMaxBytes,
    sinks: sinks.map((s) => ({ name: s.name, backfill: s.backfill })),
    site: config.siteId,
    diskReserve: true,
    commitWindowMs: config.commitWindowMs,
    // At once, without closing the file: closing checkpoints too, past what the disk dropped.
    onSyncLost: (error) => {
      logger.fatal(
        { event: 'queue_sync_lost', err: error },
        'the queue file or its log could not be made durable (a failing disk?); exiting without closing it: the next start recovers every answered reading from its log',
      );
      process.exit(EXIT_QUEUE_SYNC_LOST);
    },
  });
  if (!queue.reserveReady) {
    logger.warn(
      { event: 'queue_reserve_missing', dataDir: config.dataDir },
      'the disk is too full for the queue reserve; a disk filled by the queue may stop delivery until space is freed',
    );
  }
  for (const added of queue.registered.added)
    logger.info({ event: 'sink_added', sink: added.name, at: added.at }, `sink ${added.name} added`);
  if (queue.registered.removed.length > 0) {
    logger.warn(
      { event: 'sink_removed', sinks: queue.registered.removed, released: queue.registered.released },
      `sinks no longer configured: ${queue.registered.removed.join(', ')}; what only they still needed left the queue`,
    );
  }
  return queue;
}

/** Receive times resume after the newest one the queue holds; what the clock notices of the wall clock is logged. */
function receiveClock(queue: QueueWriter, logger: Logger): ReceiveClock {
  const says = {
    stepped_back: 'the system clock stepped back; readings without a time follow it, in nanoseconds no earlier time used',
    held: 'the system clock is behind receive times already given; readings without a time get times just after them until it catches up',
    resumed_behind:
      "the queue's newest receive time is more than a day ahead of the system clock; readings without a time follow the clock",
  } as const;
  return new ReceiveClock(Date.now, queue.newestReceivedMs, (notice) =>
    logger.warn({ event: `receive_clock_${notice.kind}`, ...notice }, says[notice.kind]),
  );
}

function deliveryThread(
  config: Config,
  sinks: SinkSpec[],
  queue: QueueWriter,
  stats: GatewayStats,
  logger: Logger,
  options: GatewayOptions,
  thinning: Catalogue['thinning'],
): DeliveryThread {
  return new DeliveryThread(
    options.deliveryScript,
    {
      dataDir: config.dataDir,
      durability: config.durability,
      logLevel: config.logLevel,
      batchBytes: BATCH_BYTES,
      backoffMaxMs: config.flushBackoffMaxMs,
      sinks,
      thinning,
    },
    queue,
    stats,
    logger,
  );
}

interface StopControl {
  readonly isStopping: () => boolean;
  /** Aborted when the gateway starts to stop. */
  readonly signal: AbortSignal;
  begin(): void;
}

function stopControl(): StopControl {
  let stopping = false;
  const controller = new AbortController();
  // Every delayed wrong-key answer listens for the stop; MAX_CONNECTIONS bounds how many do.
  setMaxListeners(0, controller.signal);
  return {
    isStopping: () => stopping,
    signal: controller.signal,
    begin: () => {
      stopping = true;
      controller.abort();
    },
  };
}

/**
 * MQTT, loaded only when its endpoint or a subscription is on. When its ports cannot be had, what
 * started before it is closed again and the start fails.
 */
async function startMqttWhenOn(
  config: Config,
  logger: Logger,
  deps: Omit<MqttDeps, 'broker' | 'subscribe' | 'host' | 'maxBatchReadings' | 'headersTimeoutMs' | 'requestTimeoutMs' | 'logger'> & {
    onFailure: () => Promise<void>;
  },
): Promise<RunningMqtt | undefined> {
  if (config.mqtt === undefined && config.mqttSubscribe === undefined) return undefined;
  const { onFailure, ...rest } = deps;
  try {
    const { startMqtt } = await import('./mqtt/start-mqtt.js');
    const mqtt = await startMqtt({
      ...rest,
      broker: config.mqtt,
      subscribe: config.mqttSubscribe,
      host: config.host,
      maxBatchReadings: config.maxBatchReadings,
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
      logger,
    });
    logger.info(
      {
        event: 'mqtt_started',
        address: mqtt.port === undefined ? undefined : `${config.host}:${mqtt.port}`,
        tlsAddress: mqtt.tlsPort === undefined ? undefined : `${config.host}:${mqtt.tlsPort}`,
        anonymous: config.mqtt?.anonymous,
        subscribe:
          config.mqttSubscribe === undefined ? undefined : { broker: config.mqttSubscribe.url, preset: config.mqttSubscribe.preset },
      },
      'MQTT started',
    );
    return mqtt;
  } catch (error) {
    await onFailure();
    throw error;
  }
}

/** Both ports listening; the queue is closed again when they cannot. */
async function listen(
  app: Hono,
  config: Config,
  certificate: ServerCertificate,
  queue: QueueWriter,
  gate: ConnectionGate,
): Promise<HttpServer> {
  try {
    return await startHttpServer(app, { ...config, certificate, gate });
  } catch (error) {
    queue.close();
    throw error;
  }
}

/** The gateway's run as its health rows tell it, when health reports are on and go to a QuestDB. */
function healthLifecycle(config: Config, questdb: QuestDbHttp | undefined, logger: Logger, startedAt: number): HealthLifecycle | undefined {
  if (!config.healthReport || questdb === undefined) return undefined;
  const reporter = new HealthReporter(questdb, config.gatewayName, logger);
  return new HealthLifecycle({ dataDir: config.dataDir, gateway: config.gatewayName, version: VERSION, reporter, logger, startedAt });
}

/**
 * Every table the dashboards and alert rules read, in the QuestDB the health rows go to: the
 * readings table (as its sink sets it up), the health and event tables, the catalogue (its
 * current version) and the fleet tables, empty unless sites report here. Never rejects.
 */
function dashboardTables(
  sinks: readonly SinkSpec[],
  questdb: QuestDbHttp | undefined,
  health: HealthLifecycle | undefined,
  catalogue: CatalogueStore,
): Promise<unknown> {
  const readings = sinks.find((s): s is QuestDbSinkSpec => s.kind === 'questdb');
  if (questdb === undefined || health === undefined || readings === undefined) return Promise.resolve();
  const quietly = (step: Promise<unknown>) => step.catch(() => undefined);
  return Promise.all([
    health.prepared,
    catalogue.publish(),
    // A table the sink would refuse is its to report, when it starts.
    quietly(setUpTable(questdb, readings.table, readings.retentionDays)),
    quietly(questdb.exec(createFleetSiteTable()).then(() => questdb.exec(createFleetSinkTable()))),
  ]);
}

/**
 * The health rows go to the first QuestDB sink's server (the local one; a remote one when the
 * local sink is off), with a small client of their own: the sinks' live in the delivery thread.
 */
/** Where the console's ship pages read the site's readings back: the local QuestDB sink's server and table. */
function readingsStore(config: Config, sinks: readonly SinkSpec[]): ReadingsStore | undefined {
  const local = sinks.find((s) => s.kind === 'questdb');
  return local === undefined ? undefined : { questdb: local.questdb, table: local.table, site: config.siteId };
}

function healthQuestDb(sinks: readonly SinkSpec[]): QuestDbHttp | undefined {
  const healthSink = sinks.find((s) => s.kind === 'questdb');
  return healthSink === undefined ? undefined : new QuestDbHttp(healthSink.questdb);
}

interface FleetReporting {
  reporter: FleetReporter;
  close(): Promise<void>;
}

/**
 * Where this site's health goes to the centre, through the sinks it has: the central gateway
 * behind an upstream of the gateway form (`…/api/v2/ingest/batch`), and a remote QuestDB (over its
 * own client, unless it already takes the health rows because the local QuestDB is off). Loaded
 * only when health reports are on and a sink goes to a centre: undefined otherwise.
 */
async function fleetReporting(
  config: Config,
  healthQuestDb: QuestDbHttp | undefined,
  identity: { site: string; instance: string },
  logger: Logger,
): Promise<FleetReporting | undefined> {
  if (!config.healthReport) return undefined;
  const destinations: FleetDestination[] = [];
  const closers: (() => Promise<void>)[] = [];
  const upstream = config.upstream;
  if (upstream !== undefined) {
    const { SiteReportSender, siteReportUrl } = await import('./sinks/upstream/site-report.js');
    const reportUrl = siteReportUrl(upstream.url);
    if (reportUrl !== undefined) {
      const sender = new SiteReportSender(reportUrl, upstream.apiKey, { caFile: upstream.caFile, proxy: upstream.proxy });
      destinations.push({ name: 'upstream', send: (report) => sender.send(JSON.stringify(report)) });
      closers.push(() => sender.close());
    }
  }
  const remote = remoteQuestDbSpec(config);
  if (remote !== undefined) {
    const client = config.localQuestdb || healthQuestDb === undefined ? new QuestDbHttp(remote.questdb) : healthQuestDb;
    const recorder = new FleetRecorder(client);
    // No row time: the central QuestDB's clock is the centre's.
    destinations.push({ name: REMOTE_QUESTDB_SINK, send: (report) => recorder.record(report, undefined) });
    if (client !== healthQuestDb) closers.push(() => client.close());
  }
  if (destinations.length === 0) return undefined;
  const { FleetReporter } = await import('./health/fleet-reporter.js');
  return {
    reporter: new FleetReporter(destinations, { ...identity, gateway: config.gatewayName }, logger),
    close: async () => void (await Promise.all(closers.map((close) => close()))),
  };
}

/**
 * Every housekeeping run: re-reads the queue's totals, gives back free pages once empty, reports
 * health (to the centre too), writes the catalogue to QuestDB if an earlier write did not get through.
 */
function scheduleHousekeeping(
  config: Config,
  queue: QueueWriter,
  housekeeper: {
    health: HealthLifecycle | undefined;
    fleet: FleetReporting | undefined;
    catalogue: CatalogueStore;
    snapshot: () => GatewaySnapshot;
    claims: SiteClaims;
    fleetRecorder: FleetRecorder | undefined;
  },
): ScheduledTask {
  const { health, fleet, catalogue, snapshot, claims, fleetRecorder } = housekeeper;
  return cron.schedule(
    config.housekeepingCron,
    async () => {
      // Picks up records the operator re-queued from the CLI, for the bound and /status.
      queue.refresh();
      if (queue.stats().records === 0) queue.compact();
      // Owners heard and conflicts seen go to the claims file; a release from the command line comes back.
      claims.flush();
      const current = snapshot();
      const conflicts = claims.view().conflicts;
      await Promise.all([
        health?.report(current),
        fleet?.reporter.report(current),
        conflicts.length === 0 ? undefined : fleetRecorder?.recordConflicts(conflicts, Date.now()),
      ]);
      await catalogue.publish();
    },
    { name: 'housekeeping', noOverlap: true },
  );
}

async function notifySystemdReady(
  config: Config,
  http: HttpServer,
  queue: QueueWriter,
  logger: Logger,
): Promise<SystemdNotifier | undefined> {
  const systemd = SystemdNotifier.fromEnvironment(process.env, logger);
  await systemd?.ready(`listening on ${config.host}:${http.port}`);
  systemd?.startWatchdog(() => queue.isHealthy());
  return systemd;
}

/** Which optional parts this start loaded. */
function partsOf(config: Config, fleet: FleetReporting | undefined): GatewayParts {
  const on = (yes: boolean) => (yes ? 'on' : 'off');
  return {
    console: on(config.console),
    mqtt: on(config.mqtt !== undefined),
    mqttSubscription: on(config.mqttSubscribe !== undefined),
    catalogue: on(config.catalogueFile !== undefined),
    fleetReport: on(fleet !== undefined),
    kafka: on(config.kafka !== undefined),
  };
}

function logStarted(
  config: Config,
  logger: Logger,
  started: {
    http: HttpServer;
    queue: QueueWriter;
    certificate: ServerCertificate;
    sinks: readonly SinkDescription[];
    instance: string;
    parts: GatewayParts;
  },
): void {
  const { http, queue, certificate } = started;
  const line = startLine(config, started);
  if (certificate.replacedDamaged !== undefined) {
    logger.warn(
      { event: 'certificate_replaced', reason: certificate.replacedDamaged, tls: tlsSummary(certificate) },
      'the self-signed TLS certificate on disk was damaged; a new one was made (its fingerprint changed)',
    );
  }
  logger.info(
    {
      event: 'started',
      version: VERSION,
      address: `${config.host}:${http.port}`,
      httpsAddress: `${config.host}:${http.httpsPort}`,
      tls: tlsSummary(certificate),
      queue: queue.path,
      durability: config.durability,
      queued: queue.stats().readings,
      questdb: config.questdbUrl,
      table: config.table,
      sinks: started.sinks,
      parts: started.parts,
      apiKeySource: config.apiKeySource,
      apiKeysFile: config.apiKeysFile,
      environment: config.environment,
      site: config.siteId,
      instance: started.instance,
    },
    line,
  );
  const fallback = config.forwards ? siteFallbackNotice({ name: config.siteId, source: config.siteIdSource }) : undefined;
  if (fallback !== undefined) logger.warn({ event: 'site_id_fallback', site: config.siteId, source: config.siteIdSource }, fallback);
}

/** Where everything is, in words: the API, the certificate's fingerprint, the queue, QuestDB and the key in use. */
function startLine(config: Config, started: { http: HttpServer; queue: QueueWriter; certificate: ServerCertificate }): string {
  const { http, queue, certificate } = started;
  const everyAddress = config.host === '0.0.0.0' || config.host === '::';
  const host = everyAddress ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  const api = `API http://${host}:${http.port}/api/v2/ingest and https://${host}:${http.httpsPort}/api/v2/ingest${everyAddress ? ' on every address' : ''}`;
  const tls = `HTTPS certificate SHA-256 ${certificate.fingerprintSha256} (${certificate.source})`;
  const queued = `queue ${queue.path} (${queue.stats().readings} readings queued)`;
  const questdb = config.localQuestdb ? `QuestDB ${config.questdbUrl}, table ${config.table}` : 'no local QuestDB';
  // The shipped development key is public; any other key is a secret and only its source is named.
  const key =
    config.apiKeySource === 'development default'
      ? `X-API-Key ${config.apiKey}, the public development key (set API_KEY before other machines reach this one)`
      : `X-API-Key from API_KEY (${config.apiKeySource})`;
  // The console is on unless switched off: a person looking for it is told why it is not there.
  const console = config.console ? '' : '; console off (CONSOLE=off)';
  return `Harbor Gateway ${VERSION}: ${api}; ${tls}; ${queued}; ${questdb}; ${key}, device keys in ${config.apiKeysFile}${console}`;
}

/** What a technician compares with the device's view: never the key. */
function tlsSummary(certificate: ServerCertificate): { source: string; fingerprintSha256: string; notAfter: string } {
  return { source: certificate.source, fingerprintSha256: certificate.fingerprintSha256, notAfter: certificate.notAfter };
}
