import type { JsonField, MqttMapping, TopicLevel } from '../../config/mqtt-config.js';
import { parseJsonBytes } from '../../reading/json-bytes.js';
import { labelDigits, namesAThing } from '../../reading/label-strings.js';
import type { ReadingIssue } from '../../reading/reading-issues.js';
import { numeric } from '../../reading/ttn-uplink.js';

/** A message's readings before validation (the reading schema judges them next), or why it has none. */
export type MappedMessage = { ok: true; readings: unknown[] } | { ok: false; message: string; details: ReadingIssue[] };

/** Object nesting followed at most: site payloads are shallow, and a hostile one must not recurse far. */
const MAX_DEPTH = 8;

/**
 * A value's number, unless it is a string that names a thing: under a name that says so (`Id`,
 * `sensor_id`, `serial`), or written as a label (a leading zero, more than 15 digits).
 */
const measured = (name: string, value: unknown): number | undefined =>
  typeof value === 'string' && (namesAThing(name) || labelDigits(value)) ? undefined : numeric(value);

const record = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

function fieldAt(json: unknown, path: readonly string[]): unknown {
  let at = json;
  for (const name of path) {
    const object = record(at);
    if (object === undefined || !Object.hasOwn(object, name)) return undefined;
    at = object[name];
  }
  return at;
}

/**
 * Turns a site broker's message into plain readings as the mapping says: the ship id from a topic
 * level or a JSON field, one reading per numeric field (flattened, numeric strings counted, as TTN
 * payloads are read, but for those that name a thing: `measured`) or the topic level's one value, the time from a field or left to the receive
 * time. A message without a number in it maps to no readings; one whose ship id is missing is refused.
 */
export function mapMessage(mapping: MqttMapping, topic: string, payload: Buffer): MappedMessage {
  const levels = topic.split('/');
  const json = parseJsonBytes(payload, ['payload'], 'Payload');
  // A plain value ("21.5", "nan", "ON") is not JSON or not an object; only the topic form takes one.
  const document = json.ok ? json.json : undefined;
  const ship = locate(mapping.ship, levels, document);
  if (typeof ship !== 'string' || ship === '') {
    return {
      ok: false,
      message: `No ship id at ${describe(mapping.ship)}`,
      details: [
        {
          loc: mapping.ship.from === 'topic' ? ['topic', mapping.ship.level] : ['payload', ...mapping.ship.path],
          msg: 'Field required',
          type: 'missing',
        },
      ],
    };
  }
  const time = mapping.time.from === 'field' ? fieldAt(document, mapping.time.path) : undefined;
  const readingTime = typeof time === 'string' ? time : undefined;
  const readings: unknown[] = [];
  const cargo = mapping.cargo;
  if (cargo.from === 'topic') {
    const cargoId = levels[cargo.level];
    const fields = record(document);
    const value =
      cargoId === undefined
        ? undefined
        : measured(cargoId, fields === undefined ? (document ?? payload.toString('utf8')) : fields['value']);
    if (cargoId !== undefined && cargoId !== '' && value !== undefined) {
      readings.push({ time: readingTime, ship_id: ship, cargo_id: cargoId, value });
    }
    return { ok: true, readings };
  }
  const excluded = new Set(cargo.exclude);
  const prefix = cargo.prefixLevel === undefined ? undefined : levels[cargo.prefixLevel];
  const visit = (value: unknown, path: string, depth: number): void => {
    if (excluded.has(path)) return;
    const object = record(value);
    if (object !== undefined) {
      if (depth >= MAX_DEPTH) return;
      for (const [name, inner] of Object.entries(object)) visit(inner, path === '' ? name : `${path}.${name}`, depth + 1);
      return;
    }
    if (path === '') return;
    const number = typeof value === 'boolean' && cargo.booleans ? (value ? 1 : 0) : measured(path.slice(path.lastIndexOf('.') + 1), value);
    if (number === undefined) return;
    readings.push({ time: readingTime, ship_id: ship, cargo_id: prefix === undefined ? path : `${prefix}.${path}`, value: number });
  };
  const fields = record(document);
  if (fields !== undefined) {
    for (const [name, value] of Object.entries(fields)) {
      // The ship's and the time's own fields are not readings.
      if (mapping.ship.from === 'field' && mapping.ship.path.length === 1 && mapping.ship.path[0] === name) continue;
      if (mapping.time.from === 'field' && mapping.time.path.length === 1 && mapping.time.path[0] === name) continue;
      visit(value, name, 1);
    }
  }
  return { ok: true, readings };
}

function locate(where: TopicLevel | JsonField, levels: readonly string[], document: unknown): unknown {
  return where.from === 'topic' ? levels[where.level] : fieldAt(document, where.path);
}

const describe = (where: TopicLevel | JsonField): string =>
  where.from === 'topic' ? `topic level ${where.level}` : `payload field ${where.path.join('.')}`;
