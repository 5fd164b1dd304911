import { setMaxListeners } from 'node:events';
import cron, { type ScheduledTask } from 'node-cron';
import type { Hono } from 'hono';
import type { Logger } from 'pino';
import type { Config } from './config/config.js';
import { DeliveryThread } from './sinks/delivery-thread.js';
import { sinkSpecs } from './sinks/sink-specs.js';
import type { SinkSpec } from './sinks/registry.js';
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
import { HealthReporter } from './health/health-reporter.js';
import { takeSnapshot, type GatewaySnapshot, type SinkDescription } from './health/snapshot.js';
import { SystemdNotifier } from './health/systemd-notify.js';
import { KeyStore } from './keys/key-store.js';
import { FailureDelay } from './http/middleware/api-key/failure-delay.js';
import { IdempotencyKeys, idempotencyFile } from './http/idempotency-keys.js';
import { GatewayStats } from './stats.js';
import { GatewayConsole } from './console/gateway-console.js';
import { VERSION } from './version.js';

export interface Gateway {
  readonly port: number;
  readonly httpsPort: number;
  readonly url: string;
  /** Re-reads the certificate (SIGHUP); on failure keeps serving the current one and throws. */
  reloadCertificate(): ServerCertificate;
  readonly queue: QueueWriter;
  readonly stats: GatewayStats;
  readonly keys: KeyStore;
  /** Graceful stop: refuse new work, finish in-flight requests, last flush, close the queue. */
  stop(): Promise<void>;
}

/** Delivery requests are bounded in bytes too, so a backlog of long ids cannot build a huge request. */
const BATCH_BYTES = 16 * 1024 * 1024;

export interface GatewayOptions {
  /**
   * The script the delivery thread runs: the gateway bundle itself, which starts the sinks when it
   * finds itself in a worker thread. Tests that run the sources pass the built bundle.
   */
  deliveryScript?: URL | string;
  /** The environment the configuration was loaded from, for the console's settings page; `process.env` by default. */
  env?: Record<string, string | undefined>;
}

/**
 * Starts the gateway: one step after another, each a named function below. The order matters:
 * nothing is written before the queue file's format is known to be readable, and the servers listen
 * only once everything they answer from is open.
 */
export async function startGateway(config: Config, logger: Logger, options: GatewayOptions = {}): Promise<Gateway> {
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
  const certificateLocation = certificateLocationOf(config);
  // Before the queue opens: a bad certificate file stops the start with its own message.
  let certificate = loadServerCertificate(certificateLocation);
  const sinks = sinkSpecs(config);
  const sinkDescriptions = sinks.map((s) => ({ name: s.name, destination: s.describe, policy: s.policy }));
  const queue = openQueue(config, sinks, logger);
  const stats = new GatewayStats();
  const delivery = deliveryThread(config, sinks, queue, stats, logger, options);
  const stopping = stopControl();
  const failureDelay = new FailureDelay(config.authFailureDelayMaxMs, config.authFailureWindowS * 1000);
  const keys = new KeyStore({ defaultKey: config.apiKey, path: config.apiKeysFile, pollMs: config.apiKeysPollMs, logger });
  const gatewayConsole = new GatewayConsole({
    queue,
    stats,
    keys,
    failureDelay,
    isStopping: stopping.isStopping,
    version: VERSION,
    certificate: () => ({ ...tlsSummary(certificate), subjectAltName: certificate.subjectAltName, pem: certificate.cert }),
    sinks: sinkDescriptions,
    delivery,
    password: config.consolePassword,
    metricsToken: config.metricsToken,
    env: options.env ?? process.env,
  });
  const idempotency = idempotencyKeys(config, logger);
  const app = createApp({
    queue,
    delivery,
    clock: receiveClock(queue, logger),
    stats,
    validator: validatorOf(config),
    logger,
    keys,
    failureDelay,
    maxBodyBytes: config.maxBodyBytes,
    maxInflightBytes: config.maxInflightBytes,
    maxBatchReadings: config.maxBatchReadings,
    harborId: config.harborId,
    isStopping: stopping.isStopping,
    stopping: stopping.signal,
    version: VERSION,
    tls: () => tlsSummary(certificate),
    sinks: sinkDescriptions,
    console: gatewayConsole,
    idempotency,
  });
  const http = await listen(app, config, certificate, queue);
  gatewayConsole.start(http.httpsPort);
  delivery.start();
  keys.watch();
  const questdb = healthQuestDb(sinks);
  const housekeeping = scheduleHousekeeping(config, logger, queue, questdb, () =>
    takeSnapshot({
      queue,
      stats,
      keys,
      failureDelay,
      isStopping: stopping.isStopping,
      version: VERSION,
      sinks: sinkDescriptions,
      idempotency,
    }),
  );
  const systemd = await notifySystemdReady(config, http, queue, logger);
  logStarted(config, logger, { http, queue, certificate, sinks: sinkDescriptions });

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= stopInOrder(config, logger, {
      stopping,
      systemd,
      housekeeping,
      keys,
      http,
      delivery,
      questdb,
      queue,
      owner,
      idempotency,
    }));

  const reloadCertificate = (): ServerCertificate => {
    const next = loadServerCertificate(certificateLocation);
    http.setCertificate(next);
    certificate = next;
    logger.info({ event: 'certificate_reloaded', tls: tlsSummary(certificate) }, 'TLS certificate re-read');
    return certificate;
  };

  return {
    port: http.port,
    httpsPort: http.httpsPort,
    reloadCertificate,
    url: `http://${config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host}:${http.port}`,
    queue,
    stats,
    keys,
    stop,
  };
}

interface Running {
  stopping: StopControl;
  systemd: SystemdNotifier | undefined;
  housekeeping: ScheduledTask;
  keys: KeyStore;
  http: HttpServer;
  delivery: DeliveryThread;
  questdb: QuestDbHttp | undefined;
  queue: QueueWriter;
  owner: DataDirLock;
  idempotency: IdempotencyKeys;
}

/** Graceful stop: refuse new work, finish in-flight requests, let the sinks drain until the deadline, close the queue. */
async function stopInOrder(config: Config, logger: Logger, running: Running): Promise<void> {
  const { stopping, systemd, housekeeping, keys, http, delivery, questdb, queue, owner, idempotency } = running;
  stopping.begin();
  const deadline = Date.now() + config.shutdownTimeoutMs;
  await systemd?.stopping();
  await housekeeping.destroy();
  keys.stop();
  logger.info({ event: 'stopping', timeoutMs: config.shutdownTimeoutMs }, 'stopping: refusing new requests');
  await http.close(deadline);
  saveIdempotencyKeys(config, logger, idempotency);
  await delivery.stop(deadline);
  await questdb?.close();
  if (!queue.close())
    logger.warn({ event: 'checkpoint_failed' }, 'could not checkpoint the queue (disk full?); its WAL is replayed at the next start');
  owner.release();
  logger.info({ event: 'stopped', queued: queue.stats().readings }, 'stopped; queue closed');
}

/** The schema of record and its fast twin, judging reading times by one window. */
function validatorOf(config: Config) {
  const limits = { maxIdLength: config.maxIdLength, window: new TimeWindow(config.readingTimes) };
  return { schema: readingSchema(limits), limits };
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

/** Opens the queue for the configured sinks and logs the sinks it added or let go since the last start. */
function openQueue(config: Config, sinks: readonly SinkSpec[], logger: Logger): QueueWriter {
  const queue = QueueWriter.open({
    dataDir: config.dataDir,
    durability: config.durability,
    maxBytes: config.queueMaxBytes,
    sinks: sinks.map((s) => ({ name: s.name, backfill: s.backfill })),
    diskReserve: true,
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
): DeliveryThread {
  return new DeliveryThread(
    options.deliveryScript ?? new URL(import.meta.url),
    {
      dataDir: config.dataDir,
      durability: config.durability,
      logLevel: config.logLevel,
      intervalMs: config.flushIntervalMs,
      batchBytes: BATCH_BYTES,
      backoffMaxMs: config.flushBackoffMaxMs,
      sinks,
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

/** Both ports listening; the queue is closed again when they cannot. */
async function listen(app: Hono, config: Config, certificate: ServerCertificate, queue: QueueWriter): Promise<HttpServer> {
  try {
    return await startHttpServer(app, { ...config, certificate });
  } catch (error) {
    queue.close();
    throw error;
  }
}

/**
 * The health rows go to the first QuestDB sink's server (the local one; a remote one when the
 * local sink is off), with a small client of their own: the sinks' live in the delivery thread.
 */
function healthQuestDb(sinks: readonly SinkSpec[]): QuestDbHttp | undefined {
  const healthSink = sinks.find((s) => s.kind === 'questdb');
  return healthSink === undefined ? undefined : new QuestDbHttp(healthSink.questdb);
}

/** Every housekeeping run: re-reads the queue's totals, gives back free pages once empty, reports health. */
function scheduleHousekeeping(
  config: Config,
  logger: Logger,
  queue: QueueWriter,
  questdb: QuestDbHttp | undefined,
  snapshot: () => GatewaySnapshot,
): ScheduledTask {
  const reporter = config.healthReport && questdb !== undefined ? new HealthReporter(questdb, config.gatewayName, logger) : undefined;
  return cron.schedule(
    config.housekeepingCron,
    async () => {
      // Picks up records the operator re-queued from the CLI, for the bound and /status.
      queue.refresh();
      if (queue.stats().records === 0) queue.compact();
      await reporter?.report(snapshot());
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

function logStarted(
  config: Config,
  logger: Logger,
  started: { http: HttpServer; queue: QueueWriter; certificate: ServerCertificate; sinks: readonly SinkDescription[] },
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
      apiKeySource: config.apiKeySource,
      apiKeysFile: config.apiKeysFile,
      environment: config.environment,
    },
    line,
  );
  // A person at a terminal reads this line, not the JSON around it.
  if (process.stderr.isTTY) process.stderr.write(`${line}\n`);
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
  return `Harbor Gateway ${VERSION}: ${api}; ${tls}; ${queued}; ${questdb}; ${key}, device keys in ${config.apiKeysFile}`;
}

/** What a technician compares with the device's view: never the key. */
function tlsSummary(certificate: ServerCertificate): { source: string; fingerprintSha256: string; notAfter: string } {
  return { source: certificate.source, fingerprintSha256: certificate.fingerprintSha256, notAfter: certificate.notAfter };
}
