import { reasonText } from '../dead-letter-reason.js';
import { parseRetryAfter } from './retry-after.js';

/** What one answer of the destination means for the readings of the request. */
export type Answer =
  | { kind: 'delivered' }
  /** Nothing taken; send again later (after `retryAfterMs` when the destination said so). */
  | { kind: 'retry'; message: string; retryAfterMs?: number }
  /** A wrong key or URL: the operator's to fix, and no reading's fault. */
  | { kind: 'operator'; message: string }
  /** The request was too large for the destination: send its readings in smaller requests (`reason`: a dead letter's, for one reading). */
  | { kind: 'too_large'; message: string; reason: string }
  /** The destination refused these readings (indices into the request) for their content, each for the reason it gave for it. */
  | { kind: 'refused_readings'; refused: RefusedReading[]; message: string }
  /** The destination refused the whole request for its content (`reason`: each reading's dead letter's). */
  | { kind: 'refused'; message: string; reason: string }
  /**
   * A central gateway gives the request's site to another gateway instance (409 `site_claimed`):
   * two gateways forward under one site id. `message` is the centre's own.
   */
  | { kind: 'claimed'; message: string };

/** A reading the destination refused: its index in the request and what the answer said of it alone. */
export interface RefusedReading {
  index: number;
  reason: string;
}

/** The parts of an HTTP answer that decide what it means. */
export interface AnswerInput {
  status: number;
  retryAfter: string | undefined;
  location: string | undefined;
  body: string;
}

/** Statuses that say the key, the harbor or the URL is wrong (407: the proxy wants credentials). */
const OPERATOR_STATUSES = new Set([401, 403, 404, 405, 407]);

/**
 * Reads a destination's answer to a batch of `readings` readings. 429 and 503 honour
 * `Retry-After`; a 400, 403 or 422 naming readings (`details[].loc` = ["body", index, …], as this
 * gateway and the existing stack answer) refuses just those (a 403 that names readings is a key
 * limited to a ship prefix refusing other ships: theirs, not the key's, fault); a 400 naming none
 * for a batch of several is taken as "batch too large" (the hosted service's 400 covers both it
 * and bad JSON, and the gateway never sends bad JSON). A 403 naming no reading stays the operator's.
 */
export function classifyAnswer(response: AnswerInput, readings: number, nowMs = Date.now()): Answer {
  const { status, retryAfter, location, body } = response;
  if (status >= 200 && status < 300) return { kind: 'delivered' };
  const message = `upstream answered ${status}${body === '' ? '' : `: ${reasonText(body)}`}`;
  if (status === 429 || status === 503) {
    const retryAfterMs = parseRetryAfter(retryAfter, nowMs);
    return retryAfterMs === undefined ? { kind: 'retry', message } : { kind: 'retry', message, retryAfterMs };
  }
  // Redirects are not followed: a moved endpoint is a URL to fix, like a wrong one.
  if (status >= 300 && status < 400)
    return {
      kind: 'operator',
      message: `${message} (redirect to ${reasonText(location ?? 'nowhere')}: set UPSTREAM_URL to the final address)`,
    };
  if (status >= 400 && status < 500 && status !== 408) return classifyRefusal(status, body, readings, message);
  return { kind: 'retry', message };
}

function classifyRefusal(status: number, body: string, readings: number, message: string): Answer {
  if (status === 409) {
    const claimed = claimRefusal(body);
    if (claimed !== undefined) return { kind: 'claimed', message: claimed };
  }
  if (status === 403) {
    const refused = refusedReadings(status, body, readings);
    return refused.length > 0 ? { kind: 'refused_readings', refused, message } : { kind: 'operator', message };
  }
  if (OPERATOR_STATUSES.has(status)) return { kind: 'operator', message };
  const reason = `upstream answered ${status}${body === '' ? '' : `: ${reasonText(answerMessage(body))}`}`;
  if (status === 413) return { kind: 'too_large', message, reason };
  if (status === 400 || status === 422) {
    const refused = refusedReadings(status, body, readings);
    if (refused.length > 0) return { kind: 'refused_readings', refused, message };
    if (status === 400 && readings > 1) return { kind: 'too_large', message, reason };
  }
  return { kind: 'refused', message, reason };
}

/** The centre's message when the answer is a `site_claimed` problem (http/site-claim-refusal.ts). */
function claimRefusal(body: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  const problem = parsed as { message?: unknown; details?: unknown } | null;
  const details = Array.isArray(problem?.details) ? problem.details : [];
  if (!details.some((d) => (d as { type?: unknown } | null)?.type === 'site_claimed')) return undefined;
  return reasonText(typeof problem?.message === 'string' ? problem.message : body);
}

type ProblemBody = { message?: unknown; title?: unknown; error?: unknown; details?: unknown; detail?: unknown };

/** The answer as problem details (`details`, or FastAPI's `detail`), or undefined when it is not JSON of that shape. */
function problemOf(body: string): ProblemBody | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as ProblemBody) : undefined;
  } catch {
    return undefined;
  }
}

/** What an answer says in words: its problem's message when it has one, else the body as it is. */
function answerMessage(body: string): string {
  const problem = problemOf(body);
  const said = [problem?.message, problem?.detail, problem?.title, problem?.error].find((m) => typeof m === 'string' && m.trim() !== '');
  return (said as string | undefined) ?? body;
}

/**
 * The readings the answer's validation details name (`loc` = ["body", index, …] or [index, …]), in
 * range, in order, each with the reason given for it alone: "upstream answered 422: value: Input
 * should be a number". One cause reads the same on every reading it refused, whatever else the
 * answer named, so a technician sees it once.
 */
export function refusedReadings(status: number, body: string, readings: number): RefusedReading[] {
  const problem = problemOf(body);
  if (problem === undefined) return [];
  const details = Array.isArray(problem.details) ? problem.details : Array.isArray(problem.detail) ? problem.detail : [];
  const said = new Map<number, string[]>();
  for (const detail of details) {
    const { loc, msg, type } = (detail ?? {}) as { loc?: unknown; msg?: unknown; type?: unknown };
    if (!Array.isArray(loc)) continue;
    const at = loc[0] === 'body' ? 1 : 0;
    const index = loc[at];
    if (!Number.isInteger(index) || (index as number) < 0 || (index as number) >= readings) continue;
    const field = loc.slice(at + 1).join('.');
    const text = typeof msg === 'string' ? msg : typeof type === 'string' ? type : 'refused';
    const texts = said.get(index as number) ?? [];
    const line = field === '' ? text : `${field}: ${text}`;
    if (!texts.includes(line)) texts.push(line);
    said.set(index as number, texts);
  }
  return [...said]
    .sort((a, b) => a[0] - b[0])
    .map(([index, texts]) => ({ index, reason: reasonText(`upstream answered ${status}: ${texts.join('; ')}`) }));
}
