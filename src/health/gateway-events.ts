import { escapeIlp, ilpString } from '../questdb/ilp-escape.js';

export const EVENTS_TABLE = 'gateway_events';

/**
 * What happened to a gateway, for the dashboards' annotations and the "gateway stopped" alert:
 * `started` and `stopped` (with the reason), `outage` (QuestDB unreachable, from its start `until`
 * its end) and `retired` (a name no longer in use, so its silence is not alerted).
 */
export type GatewayEventKind = 'started' | 'stopped' | 'outage' | 'retired';

export interface GatewayEvent {
  /** Epoch ms: when it happened, or began. */
  time: number;
  /** The gateway it happened to; the reporting gateway when unset. */
  gateway?: string;
  event: GatewayEventKind;
  /** One word to filter on: `upgrade`, `restart`, `shutdown`, `crash`, `first_start`... */
  reason: string;
  /** The words on the dashboard. */
  text: string;
  version: string;
  /** Epoch ms: the end of what began at `time` (an outage). */
  until?: number;
}

/**
 * No TTL: a handful of rows a day, and the "gateway stopped" alert reads a gateway's last event
 * however long ago it was. Deduplicated, so an event sent again after a failed write is stored once.
 */
export const createEventsTable = (table = EVENTS_TABLE): string => `CREATE TABLE IF NOT EXISTS ${table} (
  time TIMESTAMP, gateway SYMBOL, event SYMBOL, reason SYMBOL, version SYMBOL, text VARCHAR, until TIMESTAMP
) TIMESTAMP(time) PARTITION BY MONTH WAL DEDUP UPSERT KEYS(time, gateway, event)`;

/** One ILP line per event; the row time is in nanoseconds. */
export function encodeEvents(table: string, gateway: string, events: readonly GatewayEvent[]): Buffer {
  const lines = events.map((e) => {
    const columns = [`text=${ilpString(e.text)}`];
    if (e.until !== undefined) columns.push(`until=${Math.round(e.until)}000t`);
    const tags = `gateway=${escapeIlp(e.gateway ?? gateway)},event=${e.event},reason=${escapeIlp(e.reason)},version=${escapeIlp(e.version)}`;
    return `${table},${tags} ${columns.join(',')} ${Math.round(e.time)}000000n\n`;
  });
  return Buffer.from(lines.join(''));
}
