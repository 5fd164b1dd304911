import type { DailyWindow } from '../config/daily-windows.js';
import type { Logger } from 'pino';
import type { KafkaSinkConfig } from '../config/config.js';
import { QuestDbHttp, type QuestDbOptions } from '../questdb/questdb-http.js';
import { QuestDbTarget } from './questdb/questdb-target.js';
import { RemoteSiteClaims } from './remote-questdb/remote-site-claims.js';
import type { SinkOrder, SinkPolicy, SinkTarget } from './sink.js';
import { UpstreamTarget } from './upstream/upstream-target.js';
import type { UpstreamCompression } from './upstream/upstream-link.js';

/**
 * The sinks a gateway delivers to, as plain data: made from the configuration on the main thread,
 * turned into targets in the delivery thread. A new kind of sink adds its variant to `SinkSpec`, a
 * case to `createTarget`, and its entry in `sinkSpecs` (src/sinks/sink-specs.ts).
 */
export interface SinkSpecBase {
  name: string;
  policy: SinkPolicy;
  backfill: boolean;
  batchReadings: number;
  /**
   * How long the sink gathers readings before it delivers them (a full batch goes at once): the
   * local QuestDB's FLUSH_INTERVAL_MS, a remote sink's own setting or that.
   */
  flushIntervalMs: number;
  /** `current_first`: with a backlog, the newest readings go first and the backlog behind them (sink-loop.ts). */
  order?: SinkOrder;
  /** The sink's bandwidth budget in bytes a second (sink-budget.ts); unset or 0: none. */
  maxBytesPerS?: number;
  /** Times of day when the budget does not apply. */
  cheapHours?: DailyWindow[];
  /** This gateway's site (`SITE_ID`): the site of readings queued without one. */
  site: string;
  /**
   * This gateway's instance (identity/instance.ts), sent with its own readings where the destination
   * can take it, so a centre tells two gateways of one site id apart.
   */
  instance?: string;
  /**
   * How long delivered readings are kept to be sent again after a recovery (unset or 0: not kept):
   * the QuestDB sinks', whose server may lose what it acknowledged (a power cut of the local one, a
   * table dropped under a kept-alive connection).
   */
  replayWindowMs?: number;
}

export interface QuestDbSinkSpec extends SinkSpecBase {
  kind: 'questdb';
  questdb: QuestDbOptions;
  /** The server's address for logs and /status. */
  describe: string;
  table: string;
  /** Undefined: the table's TTL is left as its operator set it (a central QuestDB). */
  retentionDays: number | undefined;
  /** Resume the table when QuestDB suspended it (the local QuestDB only). */
  resumesWal: boolean;
  /**
   * A remote QuestDB's site claims (remote-questdb/remote-site-claims.ts), kept with `instance`:
   * this gateway's name there, and how long an owner's silence lets its claim lapse.
   */
  claims?: { gateway: string; expiryMs: number };
}

export interface UpstreamSinkSpec extends SinkSpecBase {
  kind: 'upstream';
  /** The destination (and proxy) for logs and /status; never the key. */
  describe: string;
  url: string;
  apiKey: string;
  caFile: string | undefined;
  proxy: string | undefined;
  timeoutMs: number;
  maxBodyBytes: number;
  compression: UpstreamCompression;
}

export interface KafkaSinkSpec extends SinkSpecBase {
  kind: 'kafka';
  kafka: KafkaSinkConfig;
  /** Brokers, topic and security for logs and /status, without the password. */
  describe: string;
}

export type SinkSpec = QuestDbSinkSpec | UpstreamSinkSpec | KafkaSinkSpec;

/** A sink's target; Kafka's code (its encoders, its client) is imported only for a Kafka sink. */
export async function createTarget(spec: SinkSpec, logger: Logger): Promise<SinkTarget> {
  switch (spec.kind) {
    case 'questdb': {
      const questdb = new QuestDbHttp({
        ...spec.questdb,
        onCompression: (gzip, build) =>
          logger.info(
            { event: 'questdb_compression', sink: spec.name, gzip, build },
            gzip ? 'ILP requests go gzip-compressed' : 'this QuestDB does not read gzip: ILP requests go plain',
          ),
      });
      const claims =
        spec.claims === undefined || spec.instance === undefined
          ? undefined
          : new RemoteSiteClaims(questdb, { instance: spec.instance, gateway: spec.claims.gateway, expiryMs: spec.claims.expiryMs });
      return new QuestDbTarget({
        questdb,
        logger,
        ...(claims === undefined ? {} : { claims }),
        options: {
          name: spec.name,
          describe: spec.describe,
          table: spec.table,
          retentionDays: spec.retentionDays,
          site: spec.site,
          resumesWal: spec.resumesWal,
        },
      });
    }
    case 'upstream':
      return new UpstreamTarget(
        {
          url: spec.url,
          apiKey: spec.apiKey,
          caFile: spec.caFile,
          proxy: spec.proxy,
          timeoutMs: spec.timeoutMs,
          maxReadings: spec.batchReadings,
          maxBodyBytes: spec.maxBodyBytes,
          compression: spec.compression,
          site: spec.site,
          ...(spec.instance === undefined ? {} : { instance: spec.instance }),
        },
        logger,
      );
    case 'kafka': {
      const { KafkaTarget } = await import('./kafka/kafka-target.js');
      return new KafkaTarget(spec.kafka, { site: spec.site, ...(spec.instance === undefined ? {} : { instance: spec.instance }) });
    }
  }
}
