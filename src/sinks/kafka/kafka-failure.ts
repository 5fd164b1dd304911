/**
 * What a failed send to Kafka means for the sink: `outage` (broker down, leader moving: send the
 * batch again later), `operator` (wrong credentials or certificate, missing topic, missing ACL:
 * retrying will not help until someone fixes the setup) or `content` (the broker refuses these
 * messages for what they are, such as too large: retrying would be refused again).
 */
export type FailureKind = 'outage' | 'operator' | 'content';

export interface KafkaFailure {
  kind: FailureKind;
  message: string;
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
]);
const CONTENT_CODES = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD', 'INVALID_TIMESTAMP']);
// Node's codes for a TLS peer that cannot be trusted: a wrong CA file or a wrong name, not an outage.
const TLS_TRUST = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS_CERT_ALTNAME_INVALID|ERR_SSL/;

interface ErrorLike {
  message?: unknown;
  code?: unknown;
  apiId?: unknown;
  cause?: unknown;
  errors?: unknown;
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

/** The most telling error of the tree: what an operator must fix first, then refused content, then the last outage error. */
export function classifyFailure(error: unknown): KafkaFailure {
  const all = [...walk(error)];
  for (const e of all) {
    const code = typeof e.apiId === 'string' ? e.apiId : e.code;
    if (typeof code === 'string' && (OPERATOR_CODES.has(code) || TLS_TRUST.test(code))) return { kind: 'operator', message: describe(e) };
  }
  for (const e of all) {
    if (typeof e.apiId === 'string' && CONTENT_CODES.has(e.apiId)) return { kind: 'content', message: describe(e) };
  }
  // The innermost, last error says most about an outage (a refused connection), the wrapper least.
  const leaves = all.filter((e) => !Array.isArray(e.errors) && e.cause === undefined);
  const last = leaves.at(-1) ?? all.at(-1);
  return { kind: 'outage', message: last === undefined ? String(error) : describe(last) };
}
