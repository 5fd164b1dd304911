import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import type { GatewayEvent } from './gateway-events.js';
import { formatDuration } from './gateway-state.js';
import type { StopReasonCode } from './stop-reason.js';

/**
 * `DATA_DIR/last-run.json`: which gateway ran, which version, and whether it stopped cleanly and
 * why. Written at start and at a clean stop, so the next start can say what came before it: an
 * upgrade, a restart, or a crash or power cut (a run that never wrote its stop).
 */
export const RUN_RECORD_FILE = 'last-run.json';

const runRecordSchema = z.object({
  gateway: z.string(),
  version: z.string(),
  started: z.number(),
  stopped: z.number().nullable(),
  stopReason: z.string().nullable(),
});

export type RunRecord = z.infer<typeof runRecordSchema>;

/** The record of the previous run; undefined on a first start (or a record that cannot be read). */
export function readRunRecord(dataDir: string): RunRecord | undefined {
  try {
    return runRecordSchema.parse(JSON.parse(readFileSync(join(dataDir, RUN_RECORD_FILE), 'utf8')));
  } catch {
    return undefined;
  }
}

/**
 * Replaced by rename, so a reader never sees half a record. Not fsynced: it only words the next
 * start's annotation, and a power cut that loses it is itself told as an unclean stop.
 */
export function writeRunRecord(dataDir: string, record: RunRecord): void {
  const path = join(dataDir, RUN_RECORD_FILE);
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(record)}\n`);
  renameSync(temporary, path);
}

/** The stop reason of a start that failed, in its `stopped` event and the run record. */
export const FAILED_START = 'failed_start';

/** What came before a start, by the reason the previous run stopped with. */
const AFTER: Record<StopReasonCode | typeof FAILED_START, string> = {
  // The version tells an upgrade: a stop announced as one that left it as it was is a restart.
  upgrade: 'a restart (stopped for an upgrade; the version is the same)',
  restart: 'a restart',
  reboot: 'a reboot',
  shutdown: 'a shutdown',
  stop: 'a stop',
  [FAILED_START]: 'a failed start',
};

/**
 * The events a start reports: `started`, worded from the previous run, and `retired` for the
 * previous name when `GATEWAY_NAME` changed, so the old name's silence does not alert forever.
 */
export function startEvents(previous: RunRecord | undefined, current: { gateway: string; version: string; at: number }): GatewayEvent[] {
  const { gateway, version, at } = current;
  const started = (reason: string, text: string): GatewayEvent => ({ time: at, event: 'started', reason, text, version });
  if (previous === undefined) return [started('first_start', `started ${version} (no earlier run on this data directory)`)];
  const events: GatewayEvent[] = [];
  if (previous.gateway !== gateway) {
    events.push({ time: at, gateway: previous.gateway, event: 'retired', reason: 'renamed', text: `renamed to ${gateway}`, version });
  }
  const upgraded = previous.version !== version ? ` from ${previous.version}` : '';
  if (previous.stopped === null) {
    const text = `started ${version}${upgraded} after an unclean stop (crash, kill or power cut) of a run begun ${formatDuration((at - previous.started) / 1000)} before`;
    events.push(started(upgraded === '' ? 'crash' : 'upgrade', text));
    return events;
  }
  const down = formatDuration((at - previous.stopped) / 1000);
  if (upgraded !== '') {
    events.push(started('upgrade', `started ${version} after an upgrade${upgraded}, down ${down}`));
  } else {
    const stopped = (previous.stopReason ?? 'stop') as keyof typeof AFTER;
    const reason = stopped === 'upgrade' ? 'restart' : stopped;
    events.push(started(reason, `started ${version} after ${AFTER[stopped] ?? AFTER.stop}, down ${down}`));
  }
  return events;
}
