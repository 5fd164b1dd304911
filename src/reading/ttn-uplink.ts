import * as z from 'zod';
import { namesAThing } from './label-strings.js';
import type { Loc } from './reading-issues.js';
import type { TimeWindow } from './time-window.js';
import { parseTimestampNs, type TimeBounds, type TimestampProblem } from './timestamp.js';

/**
 * What makes a body a The Things Network v3 webhook message: the end device it concerns. Uplinks,
 * join accepts and downlink events all carry it; everything else in the message is read leniently,
 * because The Things Network disables a webhook that keeps getting non-2xx answers.
 */
const messageSchema = z.object({ end_device_ids: z.object({ device_id: z.string() }) });

export type UplinkResult = { ok: true; readings: unknown[]; shipLoc: Loc } | { ok: false; issues: z.core.$ZodIssue[] };

const DECIMAL = /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/;

const record = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

/** A finite number, or a decimal string of one (`"3.3"`), as payload decoders often produce. */
export function numeric(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string' && DECIMAL.test(value)) {
    const parsed = Number(value);
    return Number.isFinite(parsed) ? parsed : undefined;
  }
  return undefined;
}

/** How far ahead of the gateway's clock a decoded payload's own time may be, as the existing stack has it. */
const PAYLOAD_TIME_MAX_AHEAD_S = 86_400;
/** Kept from the window's past bound, so the reading schema's check a moment later agrees. */
const PAYLOAD_TIME_MARGIN_S = 60;
const IGNORED: TimestampProblem = { type: 'datetime_range', msg: 'decoded_payload.time ignored' };

/**
 * Where a decoded payload's own time is used: within the window, and no more than a day ahead (the
 * existing stack ignores such a time and so does the gateway). A time outside falls back to
 * `received_at` rather than being refused: The Things Network cannot correct a device's clock, and
 * it disables a webhook that keeps getting refusals.
 */
function payloadBounds(window: TimeWindow | undefined, nowMs: number): TimeBounds {
  const aheadLimit = Math.floor(nowMs / 1000) + PAYLOAD_TIME_MAX_AHEAD_S;
  return {
    minSeconds: window === undefined ? 0 : window.minSeconds + PAYLOAD_TIME_MARGIN_S,
    maxSeconds: window === undefined ? aheadLimit : Math.min(aheadLimit, window.maxSeconds),
    tooEarly: IGNORED,
    tooLate: IGNORED,
  };
}

const isTime = (candidate: unknown, bounds?: TimeBounds): candidate is string =>
  typeof candidate === 'string' && typeof parseTimestampNs(candidate, bounds) === 'string';

/** The payload's time where it may be used, else the message's; undefined means the receive time. */
function readingTime(payloadTime: unknown, bounds: TimeBounds, ...received: unknown[]): string | undefined {
  if (isTime(payloadTime, bounds)) return payloadTime;
  return received.find((candidate) => isTime(candidate));
}

/**
 * Turns a webhook message into plain readings of the end device, as the existing self-hosted stack
 * does (same ship and cargo ids, so a migrated site stores the same rows): every number or numeric
 * string of the decoded payload, plus rssi, channel_rssi and snr of the first gateway and the radio
 * settings. Other message types yield no readings. The result still goes through the reading schema.
 * `decoded_payload.time` is the readings' time unless it is more than a day ahead or before the
 * window (see payloadBounds); then `received_at` is.
 */
export function uplinkToReadings(body: unknown, window?: TimeWindow, nowMs: number = Date.now()): UplinkResult {
  const parsed = messageSchema.safeParse(body, { reportInput: true });
  if (!parsed.success) return { ok: false, issues: parsed.error.issues };
  const shipLoc: Loc = ['body', 'end_device_ids', 'device_id'];
  const message = body as Record<string, unknown>;
  if (!('uplink_message' in message)) return { ok: true, readings: [], shipLoc };
  const uplink = record(message['uplink_message']);
  const payload = record(uplink['decoded_payload']);
  window?.refresh();
  const time = readingTime(payload['time'], payloadBounds(window, nowMs), message['received_at'], uplink['received_at']);
  const device = parsed.data.end_device_ids.device_id;
  const readings: unknown[] = [];
  const add = (cargo: string, raw: unknown): void => {
    const value = numeric(raw);
    if (value !== undefined) readings.push({ time, ship_id: device, cargo_id: cargo, value });
  };
  for (const [field, value] of Object.entries(payload)) {
    // A numeric string under a name that names a thing (`sensor_id`) is that thing's name, not a reading.
    if (field !== 'time' && !(typeof value === 'string' && namesAThing(field))) add(field, value);
  }
  const gateway = record(Array.isArray(uplink['rx_metadata']) ? uplink['rx_metadata'][0] : undefined);
  add('rssi', gateway['rssi']);
  add('channel_rssi', gateway['channel_rssi']);
  add('snr', gateway['snr']);
  const settings = record(uplink['settings']);
  const lora = record(record(settings['data_rate'])['lora']);
  add('bandwidth', lora['bandwidth']);
  add('spreading_factor', lora['spreading_factor']);
  add('frequency', settings['frequency']);
  return { ok: true, readings, shipLoc };
}
