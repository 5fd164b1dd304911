import { parseJsonBytes } from '../reading/json-bytes.js';
import { parseBatch, parseSingle, type ParseResult, type Validator } from '../reading/parse-readings.js';
import type { Loc, ReadingIssue } from '../reading/reading-issues.js';

/** The topics a device publishes readings to. */
export const TOPIC_PREFIX = 'harbor/v1/';
export const INGEST_TOPIC = 'harbor/v1/ingest';

/** A refusal of a publish: `topic` when its topic is not one of the gateway's, else as the parsers refuse. */
export type PublishRefusal = { ok: false; refusal: 'malformed' | 'invalid' | 'topic'; message: string; details: ReadingIssue[] };
export type PublishResult = (ParseResult & { ok: true }) | PublishRefusal;

const PAYLOAD: Loc = ['payload'];

/**
 * The readings of one publish, validated exactly as the HTTP API validates them:
 * - `harbor/v1/ingest`: the payload is the body of a single or batch push;
 * - `harbor/v1/{ship_id}/{cargo_id}`: the payload is a number (`21.5`) or `{"value": …, "time": …}`.
 * Problems are located in `topic` or `payload` instead of `body`.
 */
export function readingsOfPublish(topic: string, payload: Buffer, validator: Validator, maxBatchReadings: number): PublishResult {
  if (topic === INGEST_TOPIC) {
    const json = parseJsonBytes(payload, PAYLOAD, 'Payload');
    if (!json.ok) return { ok: false, refusal: 'malformed', message: json.message, details: json.details };
    const parsed = Array.isArray(json.json) ? parseBatch(json.json, validator, maxBatchReadings) : parseSingle(json.json, validator);
    return parsed.ok ? parsed : { ...parsed, details: parsed.details.map((d) => relocate(d, 'payload')) };
  }
  // harbor/v1/{ship_id}/{cargo_id}: one slash after the prefix, found without splitting the topic.
  const slash = topic.startsWith(TOPIC_PREFIX) ? topic.indexOf('/', TOPIC_PREFIX.length) : -1;
  if (slash === -1 || topic.indexOf('/', slash + 1) !== -1) {
    return {
      ok: false,
      refusal: 'topic',
      message: `Topic ${JSON.stringify(topic.slice(0, 200))} is not harbor/v1/{ship_id}/{cargo_id} or harbor/v1/ingest`,
      details: [{ loc: ['topic'], msg: 'Unknown topic', type: 'topic_unknown' }],
    };
  }
  const shipId = topic.slice(TOPIC_PREFIX.length, slash);
  const cargoId = topic.slice(slash + 1);
  const reading = readingOfPayload(payload);
  if (!reading.ok) return reading;
  const parsed = parseSingle({ time: reading.time, ship_id: shipId, cargo_id: cargoId, value: reading.value }, validator);
  if (parsed.ok) return parsed;
  // The ids came from the topic, the rest from the payload.
  return {
    ...parsed,
    message: parsed.message.replace(/^Reading/, 'Publish'),
    details: parsed.details.map((d) => relocate(d, d.loc[1] === 'ship_id' || d.loc[1] === 'cargo_id' ? 'topic' : 'payload')),
  };
}

/** A per-reading topic's payload: a JSON number, or an object with `value` and an optional `time`. */
function readingOfPayload(payload: Buffer): { ok: true; value: unknown; time: unknown } | PublishRefusal {
  const json = parseJsonBytes(payload, PAYLOAD, 'Payload');
  if (!json.ok) {
    // Text that is not JSON ("nan", "ON") is a value of the wrong type, as the schema says it.
    return json.details[0]?.type === 'json_invalid' && payload.length > 0
      ? { ok: true, value: payload.toString('utf8').slice(0, 100), time: undefined }
      : { ok: false, refusal: 'malformed', message: json.message, details: json.details };
  }
  const value = json.json;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const fields = value as Record<string, unknown>;
    return { ok: true, value: fields['value'], time: fields['time'] };
  }
  return { ok: true, value, time: undefined };
}

/** ["body", …] → [where, …]. */
const relocate = (detail: ReadingIssue, where: string): ReadingIssue => ({ ...detail, loc: [where, ...detail.loc.slice(1)] });
