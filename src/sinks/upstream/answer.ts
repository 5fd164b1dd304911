import { reasonText } from '../dead-letter-reason.js';
import { parseRetryAfter } from './retry-after.js';

/** What one answer of the destination means for the readings of the request. */
export type Answer =
  | { kind: 'delivered' }
  /** Nothing taken; send again later (after `retryAfterMs` when the destination said so). */
  | { kind: 'retry'; message: string; retryAfterMs?: number }
  /** A wrong key or URL: the operator's to fix, and no reading's fault. */
  | { kind: 'operator'; message: string }
  /** The request was too large for the destination: send its readings in smaller requests. */
  | { kind: 'too_large'; message: string }
  /** The destination refused these readings (indices into the request) for their content. */
  | { kind: 'refused_readings'; indices: number[]; message: string }
  /** The destination refused the whole request for its content. */
  | { kind: 'refused'; message: string }
  /**
   * A central gateway gives the request's site to another gateway instance (409 `site_claimed`):
   * two gateways forward under one site id. `message` is the centre's own.
   */
  | { kind: 'claimed'; message: string };

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
    const indices = refusedIndices(body, readings);
    return indices.length > 0 ? { kind: 'refused_readings', indices, message } : { kind: 'operator', message };
  }
  if (OPERATOR_STATUSES.has(status)) return { kind: 'operator', message };
  if (status === 413) return { kind: 'too_large', message };
  if (status === 400 || status === 422) {
    const indices = refusedIndices(body, readings);
    if (indices.length > 0) return { kind: 'refused_readings', indices, message };
    if (status === 400 && readings > 1) return { kind: 'too_large', message };
  }
  return { kind: 'refused', message };
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

/** Batch indices named by the answer's validation details, in range and without repeats. */
export function refusedIndices(body: string, readings: number): number[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return [];
  }
  if (typeof parsed !== 'object' || parsed === null) return [];
  const record = parsed as { details?: unknown; detail?: unknown };
  const details = Array.isArray(record.details) ? record.details : Array.isArray(record.detail) ? record.detail : [];
  const found = new Set<number>();
  for (const detail of details) {
    const loc = (detail as { loc?: unknown } | null)?.loc;
    if (!Array.isArray(loc)) continue;
    const index = loc[0] === 'body' ? loc[1] : loc[0];
    if (Number.isInteger(index) && (index as number) >= 0 && (index as number) < readings) found.add(index as number);
  }
  return [...found].sort((a, b) => a - b);
}
