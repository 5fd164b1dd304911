import * as z from 'zod';

/** What the trail records. */
export const AUDIT_ACTIONS = [
  'login',
  'logout',
  'key_added',
  'key_revoked',
  'dead_letters_requeued',
  'dead_letters_purged',
  'site_claim_released',
  'update_uploaded',
  'rollback_requested',
  'update_installed',
  'update_confirmed',
  'update_rolled_back',
  'settings_applied',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** `throttled`: a login turned away before its turn (429), its password not looked at. */
export const AUDIT_OUTCOMES = ['ok', 'refused', 'throttled', 'failed'] as const;
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

/** Longest subject and detail kept: enough for a key name, a release, a sentence of a verdict. */
export const MAX_SUBJECT = 200;
export const MAX_DETAIL = 500;
const MAX_ORIGIN = 200;

/**
 * One thing done to the gateway, as it is told to the trail. Never a secret: no key, password,
 * token or hash goes into any field; the callers pass names, addresses and counts.
 */
export interface AuditInput {
  action: AuditAction;
  outcome: AuditOutcome;
  /** Who or what did it: `console`, `cli`, `harbor.conf`, `harbor-update`. */
  actor: string;
  /** Where from: the browser's address (console), the user (command line). */
  origin?: string | undefined;
  /** What it was done to: a key's name, the dead letters selected, a release. */
  subject?: string | undefined;
  detail?: string | undefined;
}

/** An entry as kept: repeated refusals from one origin are one entry with a count and the times of the first and the last. */
export interface AuditEntry {
  atMs: number;
  firstMs: number;
  action: AuditAction;
  outcome: AuditOutcome;
  actor: string;
  origin: string | null;
  subject: string | null;
  detail: string | null;
  count: number;
}

/** Control characters become spaces and long text is cut, so an entry stays one line of bounded size. */
export const clip = (text: string | undefined, max: number): string | null =>
  text === undefined || text === '' ? null : text.replace(/\p{Cc}/gu, ' ').slice(0, max);

export function entryOf(input: AuditInput, atMs: number, count = 1, firstMs = atMs): AuditEntry {
  return {
    atMs,
    firstMs,
    action: input.action,
    outcome: input.outcome,
    actor: clip(input.actor, 32) ?? 'unknown',
    origin: clip(input.origin, MAX_ORIGIN),
    subject: clip(input.subject, MAX_SUBJECT),
    detail: clip(input.detail, MAX_DETAIL),
    count,
  };
}

const line = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(/^[^\p{Cc}]*$/u, 'must not hold control characters');

/** An entry told by another program (`harbor-gateway audit record`): the schema of record. */
export const auditInputSchema = z
  .object({
    action: z.enum(AUDIT_ACTIONS),
    outcome: z.enum(AUDIT_OUTCOMES),
    actor: z.string().regex(/^[a-z][a-z0-9._-]{0,31}$/, '1-32 characters of a-z 0-9 . _ -, starting with a letter'),
    origin: line(MAX_ORIGIN).optional(),
    subject: line(MAX_SUBJECT).optional(),
    detail: line(MAX_DETAIL).optional(),
  })
  .strict();

/** Logins refused or throttled are what a flood is made of: they are counted per origin and interval, not kept one by one. */
export const isRepeatable = (input: Pick<AuditInput, 'action' | 'outcome'>): boolean => input.action === 'login' && input.outcome !== 'ok';

/** "login refused", "key_revoked ok": the words of a log line. */
export const describeEntry = (entry: AuditEntry): string =>
  `${entry.action.replaceAll('_', ' ')} ${entry.outcome}${entry.subject === null ? '' : `: ${entry.subject}`}${entry.count > 1 ? ` (${entry.count} times)` : ''}`;

/** "all of questdb", "#7 #8 #9": the dead letters an operator chose, for the audit trail (at most 20 ids named). */
export function describeSelection(ids: 'all' | readonly number[], sink?: string): string {
  const of = sink === undefined ? '' : ` of ${sink}`;
  if (ids === 'all') return `all${of}`;
  const named = ids
    .slice(0, 20)
    .map((id) => `#${id}`)
    .join(' ');
  return `${named}${ids.length > 20 ? ` and ${ids.length - 20} more` : ''}${of}`;
}
