import { formatTimestampNs } from '../../reading/format-timestamp.js';
import type { QueuedReading } from '../../queue/record-codec.js';

// String(-0) is "0"; keep the sign so the consumer gets the double the device sent.
const formatValue = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));

/**
 * One reading as the JSON value of its Kafka message: the time in RFC 3339 with all nine fraction
 * digits, so a consumer gets the exact instant the queue holds.
 */
export function readingJson(r: QueuedReading): string {
  return `{"time":"${formatTimestampNs(r.timeNs)}","ship_id":${JSON.stringify(r.shipId)},"cargo_id":${JSON.stringify(r.cargoId)},"value":${formatValue(r.value)}}`;
}
