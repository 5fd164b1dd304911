import { isOwnRecord, type DeadLetterInput, type QueueRecord } from '../queue/queue-reader.js';
import { RecordCorruptError, scanRecord, type LineVisitor, type QueuedReading } from '../queue/record-codec.js';
import { formatTimestampNs } from '../reading/format-timestamp.js';
import { corruptRecordLetter } from './dead-letter-reason.js';

/** One reading on its way to a JSON destination: its JSON object, its size, and the record it came from. */
export interface OutgoingReading {
  reading: QueuedReading;
  record: QueueRecord;
  json: string;
  bytes: number;
}

// JSON.stringify(-0) is "0"; keep the sign so the destination stores the double that was received.
const jsonNumber = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));
// JSON's number grammar: the queue's text of a value (String of the double, as received) passes it
// and is sent as it is, which spares formatting the double again; any other text is formatted.
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** A reading's value as JSON: the queue's text when it is a JSON number, else the double formatted. */
export function jsonValueText(r: QueuedReading, valueText?: string): string {
  return valueText !== undefined && JSON_NUMBER.test(valueText) ? valueText : jsonNumber(r.value);
}

/**
 * A reading as the API's Reading object, with its stored time in full (RFC 3339, all nine fraction
 * digits): the body of an upstream batch, exactly the API's, and with `siteJson` (the site as a
 * JSON string) the value of a Kafka message.
 */
export function readingJson(r: QueuedReading, siteJson?: string, valueText?: string): string {
  const value = jsonValueText(r, valueText);
  return `{"time":"${formatTimestampNs(r.timeNs)}","ship_id":${JSON.stringify(r.shipId)},"cargo_id":${JSON.stringify(r.cargoId)},"value":${value}${siteJson === undefined ? '' : `,"site":${siteJson}`}}`;
}

/**
 * What a reading's JSON says after `"site":` — its site as a JSON string, the record's, else `site`
 * (this gateway's) — and, for this gateway's own readings with `instance` given, `,"instance":` and
 * the instance: so a consumer tells two gateways that forward under one site id apart.
 */
export function originJson(record: QueueRecord, site: string, instance?: string): string {
  const siteJson = JSON.stringify(record.site ?? site);
  return instance !== undefined && isOwnRecord(record) ? `${siteJson},"instance":${JSON.stringify(instance)}` : siteJson;
}

/** `originJson` for a batch's records one after another: neighbours of one origin share one string. */
export function originsJson(site: string, instance?: string): (record: QueueRecord) => string {
  let lastSite: string | undefined;
  let lastOwn = false;
  let last = '';
  return (record) => {
    const own = isOwnRecord(record);
    if (last === '' || record.site !== lastSite || own !== lastOwn) {
      last = originJson(record, site, instance);
      lastSite = record.site;
      lastOwn = own;
    }
    return last;
  };
}

/**
 * The records' readings in queue order; a record that cannot be decoded becomes one dead letter as
 * a whole. With `site` (this gateway's), each reading's JSON names its site: the record's, else that
 * one, and with `instance` too this gateway's instance for its own readings.
 */
export function outgoingReadings(
  records: readonly QueueRecord[],
  deadLetters: DeadLetterInput[],
  site?: string,
  instance?: string,
): OutgoingReading[] {
  const out: OutgoingReading[] = [];
  for (const { reading, record, valueText, siteJson } of eachReading(records, deadLetters, site, instance)) {
    const json = readingJson(reading, siteJson, valueText);
    out.push({ reading, record, json, bytes: Buffer.byteLength(json) });
  }
  return out;
}

/** A reading as taken from its record: its value's text as queued and, with a site given, its site as `originJson` writes it. */
export interface TakenReading {
  reading: QueuedReading;
  record: QueueRecord;
  valueText: string;
  siteJson: string | undefined;
}

/**
 * The records' readings one at a time, taken as they are asked for: a sink that sends a batch in
 * several requests holds only one request's readings at once (the dead letters are complete once
 * all are taken).
 */
export function* eachReading(
  records: readonly QueueRecord[],
  deadLetters: DeadLetterInput[],
  site?: string,
  instance?: string,
): Generator<TakenReading> {
  // A record's readings and their values' text, whole before any is given: a corrupt record is one dead letter.
  const rows: QueuedReading[] = [];
  const valueTexts: string[] = [];
  const take: LineVisitor = (text, time, tab1, tab2, tab3, value, end) => {
    rows.push({ timeNs: text.slice(time, tab1), shipId: text.slice(tab1 + 1, tab2), cargoId: text.slice(tab2 + 1, tab3), value });
    valueTexts.push(text.slice(tab3 + 1, end));
  };
  const origin = site === undefined ? undefined : originsJson(site, instance);
  for (const record of records) {
    const siteJson = origin?.(record);
    rows.length = 0;
    valueTexts.length = 0;
    try {
      scanRecord(record.payload, take);
    } catch (error) {
      if (!(error instanceof RecordCorruptError)) throw error;
      deadLetters.push(corruptRecordLetter(record, error));
      continue;
    }
    for (let i = 0; i < rows.length; i++) yield { reading: rows[i]!, record, valueText: valueTexts[i]!, siteJson };
  }
}
