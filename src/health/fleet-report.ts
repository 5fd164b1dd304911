import * as z from 'zod';
import { isSiteId } from '../keys/key-file.js';
import type { GatewayState } from './gateway-state.js';
import { sinkHealthRow } from './sink-health.js';
import type { GatewaySnapshot } from './snapshot.js';

const count = z.number().int().nonnegative();
const seconds = z.number().finite().nonnegative().nullable();
const text = (max: number) => z.string().max(max);

/**
 * What a site tells the centre of itself at every report interval: the health a central operator
 * needs to answer "which of my sites is behind, offline, or has a wrong clock". The centre checks
 * it against this schema, ignoring fields it does not know (a newer site's).
 */
export const fleetReportSchema = z.object({
  site: z.string().refine(isSiteId, 'a site id: 1-128 characters without control characters'),
  /** The site gateway's instance (absent from releases that made none): whose report it is. */
  instance: z.string().max(64).optional(),
  gateway: text(128),
  version: text(64),
  /** The site's clock when it sent the report: the centre's clock at receipt tells the offset. */
  sentAt: z.iso.datetime({ offset: true }),
  uptimeSeconds: count,
  state: z.enum(['delivering', 'catching_up', 'buffering', 'refusing', 'stopped']),
  stateText: text(2000),
  ready: z.boolean(),
  clockSynchronized: z.boolean().nullable(),
  queue: z.object({ readings: count, bytes: count, maxBytes: count, oldestAgeSeconds: seconds }),
  deadLetters: count,
  acceptedReadings: count,
  /** Each sink as its health row at the site has it (sink-health.ts). */
  sinks: z
    .array(
      z.object({
        sink: text(64),
        state: text(32),
        backlogReadings: count,
        oldestAgeSeconds: seconds,
        deliveredReadings: count,
        failedDeliveries: count,
        deadLettered: count,
        droppedReadings: count,
      }),
    )
    .max(32),
});

export type FleetReport = z.infer<typeof fleetReportSchema>;

/** A site's report from its snapshot and its state in words. */
export function buildFleetReport(
  snapshot: GatewaySnapshot,
  state: GatewayState,
  identity: { site: string; instance: string; gateway: string },
  now = Date.now(),
): FleetReport {
  return {
    site: identity.site,
    instance: identity.instance,
    gateway: identity.gateway,
    version: snapshot.version,
    sentAt: new Date(now).toISOString(),
    uptimeSeconds: snapshot.uptimeSeconds,
    state: state.code,
    stateText: state.text,
    ready: snapshot.ready,
    clockSynchronized: snapshot.clockSynchronized,
    queue: {
      readings: snapshot.queue.readings,
      bytes: snapshot.queue.bytes,
      maxBytes: snapshot.queue.maxBytes,
      oldestAgeSeconds: snapshot.queue.oldestAgeSeconds,
    },
    deadLetters: snapshot.deadLetters,
    acceptedReadings: snapshot.totals.acceptedReadings,
    sinks: snapshot.sinks.map(sinkHealthRow),
  };
}
