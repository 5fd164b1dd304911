import type { Logger } from 'pino';
import { QuestDbHttp, type QuestDbOptions } from '../questdb/questdb-http.js';
import { QuestDbTarget } from './questdb/questdb-target.js';
import type { SinkPolicy, SinkTarget } from './sink.js';

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
  /** How long delivered readings are kept to be sent again after a recovery (0: not kept). */
  replayWindowMs: number;
}

export interface QuestDbSinkSpec extends SinkSpecBase {
  kind: 'questdb';
  questdb: QuestDbOptions;
  /** The server's address for logs and /status. */
  describe: string;
  table: string;
  retentionDays: number;
}

export type SinkSpec = QuestDbSinkSpec;

export function createTarget(spec: SinkSpec, logger: Logger): SinkTarget {
  switch (spec.kind) {
    case 'questdb':
      return new QuestDbTarget({
        questdb: new QuestDbHttp(spec.questdb),
        logger,
        options: { name: spec.name, describe: spec.describe, table: spec.table, retentionDays: spec.retentionDays },
      });
  }
}
