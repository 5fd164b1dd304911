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
import { GatewayStats } from './stats.js';
import { GatewayConsole } from './console/gateway-console.js';
import { VERSION } from './version.js';
import { InflightBudget } from './http/inflight-budget.js';
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
  const certificateLocation = certificateLocationOf(config);
  // A queue file from a newer release is refused before anything is written, the certificate included.
  assertReadableFormat(queuePath(config.dataDir));
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
  // One clock and one byte budget for HTTP and MQTT: receive times stay distinct across both.
  const clock = new ReceiveClock();
  const inflight = new InflightBudget(config.maxInflightBytes);
  const validator = validatorOf(config);
  const app = createApp({
    queue,
    delivery,
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
    isStopping: stopping.isStopping,
    stopping: stopping.signal,
    version: VERSION,
    tls: () => tlsSummary(certificate),
    sinks: sinkDescriptions,
    console: gatewayConsole,
  });
  const http = await listen(app, config, certificate, queue);
  const mqtt = await startMqttWhenOn(config, logger, {
    certificate,
    gate: http.gate,
    budget: inflight,
    queue,
    delivery,
    clock,
    stats,
    keys,
    failureDelay,
    validator,
    stopping: stopping.signal,
    accepted: (principal, readings) => gatewayConsole.accepted(principal, readings),
    onFailure: async () => {
      await http.close(Date.now());
      queue.close();
    },
  });
  gatewayConsole.start(http.httpsPort);
  delivery.start();
  keys.watch();
  const questdb = healthQuestDb(sinks);
  const housekeeping = scheduleHousekeeping(config, logger, queue, questdb, () =>
    takeSnapshot({ queue, stats, keys, failureDelay, isStopping: stopping.isStopping, version: VERSION, sinks: sinkDescriptions }),
  );
  const systemd = await notifySystemdReady(config, http, queue, logger);
  logStarted(config, logger, { http, queue, certificate, sinks: sinkDescriptions });

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= stopInOrder(config, logger, { stopping, systemd, housekeeping, keys, http, mqtt, delivery, questdb, queue }));

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
    stop,
  };
}

interface Running {
  stopping: StopControl;
  systemd: SystemdNotifier | undefined;
  housekeeping: ScheduledTask;
  keys: KeyStore;
  http: HttpServer;
  mqtt: RunningMqtt | undefined;
  delivery: DeliveryThread;
  questdb: QuestDbHttp | undefined;
  queue: QueueWriter;
}

/** Graceful stop: refuse new work, finish in-flight requests, let the sinks drain until the deadline, close the queue. */
async function stopInOrder(config: Config, logger: Logger, running: Running): Promise<void> {
  const { stopping, systemd, housekeeping, keys, http, mqtt, delivery, questdb, queue } = running;
  stopping.begin();
  const deadline = Date.now() + config.shutdownTimeoutMs;
  await systemd?.stopping();
  await housekeeping.destroy();
  keys.stop();
  logger.info({ event: 'stopping', timeoutMs: config.shutdownTimeoutMs }, 'stopping: refusing new requests');
  await Promise.all([http.close(deadline), mqtt?.stop(deadline)]);
  await delivery.stop(deadline);
  await questdb?.close();
  if (!queue.close())
    logger.warn({ event: 'checkpoint_failed' }, 'could not checkpoint the queue (disk full?); its WAL is replayed at the next start');
  logger.info({ event: 'stopped', queued: queue.stats().readings }, 'stopped; queue closed');
}

/** The schema of record and its fast twin, judging reading times by one window. */
function validatorOf(config: Config) {
  const limits = { maxIdLength: config.maxIdLength, window: new TimeWindow(config.readingTimes) };
  return { schema: readingSchema(limits), limits };
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
  });
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
    'harbor gateway listening',
  );
}

/** What a technician compares with the device's view: never the key. */
function tlsSummary(certificate: ServerCertificate): { source: string; fingerprintSha256: string; notAfter: string } {
  return { source: certificate.source, fingerprintSha256: certificate.fingerprintSha256, notAfter: certificate.notAfter };
}
