import { setMaxListeners } from 'node:events';
import cron from 'node-cron';
import type { Logger } from 'pino';
import type { Config } from './config/config.js';
import { DeliveryThread } from './sinks/delivery-thread.js';
import { sinkSpecs } from './sinks/sink-specs.js';
import { QuestDbHttp } from './questdb/questdb-http.js';
import { createApp } from './http/app.js';
import { startHttpServer, type HttpServer } from './http/server.js';
import { loadServerCertificate, type CertificateLocation, type ServerCertificate } from './tls/certificate-store.js';
import { queuePath } from './queue/queue-file.js';
import { assertReadableFormat } from './queue/queue-format.js';
import { QueueWriter } from './queue/queue-writer.js';
import { readingSchema } from './reading/reading-schema.js';
import { ReceiveClock } from './reading/timestamp.js';
import { HealthReporter } from './health/health-reporter.js';
import { takeSnapshot } from './health/snapshot.js';
import { SystemdNotifier } from './health/systemd-notify.js';
import { KeyStore } from './keys/key-store.js';
import { FailureDelay } from './http/middleware/api-key/failure-delay.js';
import { GatewayStats } from './stats.js';
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
}

export async function startGateway(config: Config, logger: Logger, options: GatewayOptions = {}): Promise<Gateway> {
  const certificateLocation: CertificateLocation = {
    certFile: config.tlsCertFile,
    keyFile: config.tlsKeyFile,
    credentialsDirectory: process.env['CREDENTIALS_DIRECTORY'],
    dataDir: config.dataDir,
  };
  // A queue file from a newer release is refused before anything is written, the certificate included.
  assertReadableFormat(queuePath(config.dataDir));
  // Before the queue opens: a bad certificate file stops the start with its own message.
  let certificate = loadServerCertificate(certificateLocation);
  const sinks = sinkSpecs(config);
  const queue = QueueWriter.open({
    dataDir: config.dataDir,
    durability: config.durability,
    maxBytes: config.queueMaxBytes,
    sinks: sinks.map((s) => ({ name: s.name, backfill: s.backfill })),
  });
  const stats = new GatewayStats();
  const questdbOptions = {
    url: config.questdbUrl,
    username: config.questdbUsername,
    password: config.questdbPassword,
    timeoutMs: config.flushTimeoutMs,
  };
  const delivery = new DeliveryThread(
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
  const sinkDescriptions = sinks.map((s) => ({ name: s.name, destination: s.describe, policy: s.policy }));
  for (const added of queue.registered.added)
    logger.info({ event: 'sink_added', sink: added.name, at: added.at }, `sink ${added.name} added`);
  if (queue.registered.removed.length > 0) {
    logger.warn(
      { event: 'sink_removed', sinks: queue.registered.removed, released: queue.registered.released },
      `sinks no longer configured: ${queue.registered.removed.join(', ')}; what only they still needed left the queue`,
    );
  }
  // The health rows use their own small client: the sinks' live in the delivery thread.
  const questdb = new QuestDbHttp(questdbOptions);
  let stopping = false;
  const isStopping = (): boolean => stopping;
  const stopSignal = new AbortController();
  // Every delayed wrong-key answer listens for the stop; MAX_CONNECTIONS bounds how many do.
  setMaxListeners(0, stopSignal.signal);
  const failureDelay = new FailureDelay(config.authFailureDelayMaxMs, config.authFailureWindowS * 1000);
  const keys = new KeyStore({ defaultKey: config.apiKey, path: config.apiKeysFile, pollMs: config.apiKeysPollMs, logger });
  const app = createApp({
    queue,
    delivery,
    clock: new ReceiveClock(),
    stats,
    validator: { schema: readingSchema({ maxIdLength: config.maxIdLength }), limits: { maxIdLength: config.maxIdLength } },
    logger,
    keys,
    failureDelay,
    maxBodyBytes: config.maxBodyBytes,
    maxInflightBytes: config.maxInflightBytes,
    maxBatchReadings: config.maxBatchReadings,
    harborId: config.harborId,
    isStopping,
    stopping: stopSignal.signal,
    version: VERSION,
    tls: () => tlsSummary(certificate),
    sinks: sinkDescriptions,
  });

  let http: HttpServer;
  try {
    http = await startHttpServer(app, { ...config, certificate });
  } catch (error) {
    queue.close();
    throw error;
  }
  delivery.start();
  keys.watch();
  const reporter = config.healthReport ? new HealthReporter(questdb, config.gatewayName, logger) : undefined;
  const housekeeping = cron.schedule(
    config.housekeepingCron,
    async () => {
      // Picks up records the operator re-queued from the CLI, for the bound and /status.
      queue.refresh();
      if (queue.stats().records === 0) queue.compact();
      await reporter?.report(takeSnapshot({ queue, stats, keys, failureDelay, isStopping, version: VERSION, sinks: sinkDescriptions }));
    },
    { name: 'housekeeping', noOverlap: true },
  );
  const systemd = SystemdNotifier.fromEnvironment(process.env, logger);
  await systemd?.ready(`listening on ${config.host}:${http.port}`);
  systemd?.startWatchdog(() => queue.isHealthy());
  const depth = queue.stats();
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
      queued: depth.readings,
      questdb: config.questdbUrl,
      table: config.table,
      sinks: sinkDescriptions,
      apiKeySource: config.apiKeySource,
      apiKeysFile: config.apiKeysFile,
      environment: config.environment,
    },
    'harbor gateway listening',
  );

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      stopping = true;
      stopSignal.abort();
      const deadline = Date.now() + config.shutdownTimeoutMs;
      await systemd?.stopping();
      await housekeeping.destroy();
      keys.stop();
      logger.info({ event: 'stopping', timeoutMs: config.shutdownTimeoutMs }, 'stopping: refusing new requests');
      await http.close(deadline);
      await delivery.stop(deadline);
      await questdb.close();
      if (!queue.close())
        logger.warn({ event: 'checkpoint_failed' }, 'could not checkpoint the queue (disk full?); its WAL is replayed at the next start');
      logger.info({ event: 'stopped', queued: queue.stats().readings }, 'stopped; queue closed');
    })());

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

/** What a technician compares with the device's view: never the key. */
function tlsSummary(certificate: ServerCertificate): { source: string; fingerprintSha256: string; notAfter: string } {
  return { source: certificate.source, fingerprintSha256: certificate.fingerprintSha256, notAfter: certificate.notAfter };
}
