import { fastValidate } from './fast-validate.js';
import { toReadingIssues, type Loc, type ReadingIssue } from './reading-issues.js';
import type { Reading, ReadingLimits, ReadingSchema } from './reading-schema.js';

/** The schema of record and the limits its fast twin needs. */
export interface Validator {
  schema: ReadingSchema;
  limits: ReadingLimits;
}

/** Details are capped so one huge bad batch cannot produce a huge answer. */
export const MAX_REPORTED_PROBLEMS = 100;

export type ParseResult =
  /** `shipLocs`: where each reading's ship id came from, when not `body[i].ship_id`. */
  | { ok: true; readings: Reading[]; shipLocs?: Loc[] }
  /** `malformed`: not the shape of a reading or batch at all; `invalid`: readings the schema refuses. */
  | { ok: false; refusal: 'malformed' | 'invalid'; message: string; details: ReadingIssue[] };

const shapeError = (message: string, msg: string, type: string): ParseResult => ({
  ok: false,
  refusal: 'malformed',
  message,
  details: [{ loc: ['body'], msg, type }],
});

const kind = (input: unknown): string => (input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input);

function schemaError(problems: ReadingIssue[], total: number, what: string): ParseResult {
  return {
    ok: false,
    refusal: 'invalid',
    message: `${what} does not match the schema (${total} problem${total === 1 ? '' : 's'})`,
    details: problems.slice(0, MAX_REPORTED_PROBLEMS),
  };
}

/** A single push: exactly one reading object. */
export function parseSingle(body: unknown, { schema, limits }: Validator): ParseResult {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return shapeError(
      'Body must be one reading (a JSON object); send arrays to the batch endpoint',
      `Expected a JSON object, got ${kind(body)}`,
      'object_type',
    );
  }
  limits.window?.refresh();
  const reading = fastValidate(body, limits);
  if (reading !== undefined) return { ok: true, readings: [reading] };
  const issues = explain(body, schema);
  return schemaError(toReadingIssues(issues, ['body']), issues.length, 'Reading');
}

/** A batch push: a non-empty array of at most `maxReadings` readings, valid as a whole or refused as a whole. */
export function parseBatch(body: unknown, { schema, limits }: Validator, maxReadings: number): ParseResult {
  if (!Array.isArray(body)) {
    return shapeError('Body must be a JSON array of readings', `Expected a JSON array, got ${kind(body)}`, 'array_type');
  }
  if (body.length === 0) return shapeError('Batch is empty', 'Batch must contain at least one reading', 'too_short');
  if (body.length > maxReadings) {
    return shapeError(
      `Batch has ${body.length} readings; at most ${maxReadings} are accepted per request`,
      `Batch must contain at most ${maxReadings} readings`,
      'too_long',
    );
  }
  limits.window?.refresh();
  const readings: Reading[] = new Array(body.length);
  let problems: ReadingIssue[] | undefined;
  let total = 0;
  for (let i = 0; i < body.length; i++) {
    const reading = fastValidate(body[i], limits);
    if (reading !== undefined) {
      readings[i] = reading;
    } else {
      const issues = explain(body[i], schema);
      total += issues.length;
      problems ??= [];
      if (problems.length < MAX_REPORTED_PROBLEMS) problems.push(...toReadingIssues(issues, ['body', i]));
    }
  }
  return problems === undefined ? { ok: true, readings } : schemaError(problems, total, 'Batch');
}

/** Why the schema of record refuses a reading; only called once the fast check said no. */
function explain(input: unknown, schema: ReadingSchema) {
  const result = schema.safeParse(input, { reportInput: true });
  if (result.success) throw new Error('fast validation refused a reading the schema accepts');
  return result.error.issues;
}
