import type { SinkSpecBase } from './registry.js';

/** An optional sink's name, and how it delivers as its own settings say, for this site (and this gateway's instance). */
export function specBase(
  name: string,
  settings: Pick<SinkSpecBase, 'policy' | 'backfill' | 'batchReadings' | 'flushIntervalMs' | 'order' | 'maxBytesPerS' | 'cheapHours'>,
  site: string,
  instance: string | undefined,
): SinkSpecBase {
  return {
    name,
    policy: settings.policy,
    backfill: settings.backfill,
    batchReadings: settings.batchReadings,
    flushIntervalMs: settings.flushIntervalMs,
    ...(settings.order === undefined ? {} : { order: settings.order }),
    ...(settings.maxBytesPerS === undefined ? {} : { maxBytesPerS: settings.maxBytesPerS }),
    ...(settings.cheapHours === undefined || settings.cheapHours.length === 0 ? {} : { cheapHours: settings.cheapHours }),
    site,
    ...(instance === undefined ? {} : { instance }),
  };
}
