/**
 * What a failed send to Kafka means for the sink: `outage` (broker down, leader moving: send the
 * batch again later), `operator` (wrong credentials or certificate, missing topic, missing ACL:
 * retrying will not help until someone fixes the setup), `content` (the broker refuses these
 * messages for what they are, such as too large: retrying would be refused again) or `clock` (the
 * broker refuses the messages' timestamps: the site's clock is off from the broker's, which no
 * reading is to blame for; sent again with times on the broker's clock).
 */
export type FailureKind = 'outage' | 'operator' | 'content' | 'clock';

export interface KafkaFailure {
  kind: FailureKind;
  message: string;
  /** For `clock`: the broker's time when it refused (epoch ms), as its answer tells it; undefined when it does not. */
  brokerNowMs?: number;
}

const OPERATOR_CODES = new Set([
  'UNKNOWN_TOPIC_OR_PARTITION',
  'INVALID_TOPIC_EXCEPTION',
  'TOPIC_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
  'SASL_AUTHENTICATION_FAILED',
  'UNSUPPORTED_SASL_MECHANISM',
  'ILLEGAL_SASL_STATE',
  'PLT_KFK_AUTHENTICATION',
  // KAFKA_COMPRESSION names a codec whose native module the client cannot load.
  'PLT_KFK_UNSUPPORTED_COMPRESSION',
]);
const CONTENT_CODES = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD']);
/** Kafka 4's default `log.message.timestamp.after.max.ms`: how far ahead of its clock a broker takes a timestamp. */
const DEFAULT_AFTER_MAX_MS = 3_600_000n;
const LONG_MAX = 9_223_372_036_854_775_807n;
// The broker's words for a refused timestamp: "… is out of range. The timestamp should be within [lowest, highest]".
const TIMESTAMP_RANGE = /should be within \[(-?\d+), (-?\d+)\]/;
// Node's codes for a TLS peer that cannot be trusted: a wrong CA file or a wrong name, not an outage.
const TLS_TRUST = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS_CERT_ALTNAME_INVALID|ERR_SSL/;

interface ErrorLike {
  message?: unknown;
  code?: unknown;
  apiId?: unknown;
  cause?: unknown;
  errors?: unknown;
  response?: unknown;
}

/** Every error in the tree the client library builds (retries collect their errors, causes nest). */
function* walk(error: unknown, depth = 0): Generator<ErrorLike> {
  if (typeof error !== 'object' || error === null || depth > 8) return;
  const e = error as ErrorLike;
  yield e;
  if (Array.isArray(e.errors)) for (const inner of e.errors) yield* walk(inner, depth + 1);
  yield* walk(e.cause, depth + 1);
}

const describe = (e: ErrorLike): string => {
  const message = typeof e.message === 'string' ? e.message : String(e);
  const code = typeof e.apiId === 'string' ? e.apiId : typeof e.code === 'string' ? e.code : undefined;
  return code !== undefined && !message.includes(code) ? `${code}: ${message}` : message;
};

/**
 * The broker's clock from a timestamp refusal's range [now - before, now + after]: its lower end
 * when `before` is unbounded (Kafka's default), else its upper end less the default `after` (1 h).
 */
export function brokerNowOf(text: string): number | undefined {
  const range = TIMESTAMP_RANGE.exec(text);
  if (range === null) return undefined;
  const lowest = BigInt(range[1]!);
  const highest = BigInt(range[2]!);
  return Number(lowest < 0n ? lowest + LONG_MAX : highest - DEFAULT_AFTER_MAX_MS);
}

/** The broker's own words about refused records, wherever the client put its answer. */
function recordErrorTexts(all: readonly ErrorLike[]): string[] {
  const texts: string[] = [];
  for (const e of all) {
    const responses = (e.response as { responses?: { partitionResponses?: { recordErrors?: { batchIndexErrorMessage?: unknown }[] }[] }[] })
      ?.responses;
    for (const topic of responses ?? [])
      for (const partition of topic.partitionResponses ?? [])
        for (const record of partition.recordErrors ?? [])
          if (typeof record.batchIndexErrorMessage === 'string') texts.push(record.batchIndexErrorMessage);
  }
  return texts;
}

/** The most telling error of the tree: what an operator must fix first, then a clock off, then refused content, then the last outage error. */
export function classifyFailure(error: unknown): KafkaFailure {
  const all = [...walk(error)];
  for (const e of all) {
    const code = typeof e.apiId === 'string' ? e.apiId : e.code;
    if (typeof code === 'string' && (OPERATOR_CODES.has(code) || TLS_TRUST.test(code))) return { kind: 'operator', message: describe(e) };
  }
  if (all.some((e) => e.apiId === 'INVALID_TIMESTAMP')) {
    const said = recordErrorTexts(all).find((text) => TIMESTAMP_RANGE.test(text));
    const brokerNowMs = said === undefined ? undefined : brokerNowOf(said);
    const message = `INVALID_TIMESTAMP: ${said ?? 'the broker refused the message timestamps'}`;
    return brokerNowMs === undefined ? { kind: 'clock', message } : { kind: 'clock', message, brokerNowMs };
  }
  for (const e of all) {
    if (typeof e.apiId === 'string' && CONTENT_CODES.has(e.apiId)) return { kind: 'content', message: describe(e) };
  }
  // The innermost, last error says most about an outage (a refused connection), the wrapper least.
  const leaves = all.filter((e) => !Array.isArray(e.errors) && e.cause === undefined);
  const last = leaves.at(-1) ?? all.at(-1);
  return { kind: 'outage', message: last === undefined ? String(error) : describe(last) };
}
