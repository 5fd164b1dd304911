import type { Config } from '../config/config.js';
import type { SinkSpec } from './registry.js';

/** The sinks the configuration asks for, the local QuestDB first. */
export function sinkSpecs(config: Config): SinkSpec[] {
  return [
    {
      kind: 'questdb',
      name: 'questdb',
      // The local QuestDB is the site's own record: it never drops, and it starts with what is queued.
      policy: 'block',
      backfill: true,
      batchReadings: config.flushBatchReadings,
      // On the appliance QuestDB shares the gateway's power: what it acknowledged last can be lost.
      replayWindowMs: config.replayWindowMs,
      questdb: {
        url: config.questdbUrl,
        username: config.questdbUsername,
        password: config.questdbPassword,
        timeoutMs: config.flushTimeoutMs,
      },
      describe: config.questdbUrl,
      table: config.table,
      retentionDays: config.retentionDays,
    },
  ];
}
