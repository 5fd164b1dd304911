import type { ProblemDetail } from './problems.js';
import { toProblemDetails } from './problems.js';
import type { Reading, ReadingSchema } from './reading-schema.js';

/** Details are capped so one huge bad batch cannot produce a huge answer. */
export const MAX_REPORTED_PROBLEMS = 100;

export type ParseResult =
  | { ok: true; readings: Reading[] }
  | { ok: false; status: 400 | 422; message: string; details: ProblemDetail[] };

const shapeError = (message: string, msg: string, type: string): ParseResult => ({
  ok: false,
  status: 400,
  message,
  details: [{ loc: ['body'], msg, type }],
});

const kind = (input: unknown): string => (input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input);

function schemaError(problems: ProblemDetail[], total: number, what: string): ParseResult {
  return {
    ok: false,
    status: 422,
    message: `${what} does not match the schema (${total} problem${total === 1 ? '' : 's'})`,
    details: problems.slice(0, MAX_REPORTED_PROBLEMS),
  };
}

/** A single push: exactly one reading object. */
export function parseSingle(body: unknown, schema: ReadingSchema): ParseResult {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return shapeError(
      'Body must be one reading (a JSON object); send arrays to the batch endpoint',
      `Expected a JSON object, got ${kind(body)}`,
      'object_type',
    );
  }
  const result = schema.safeParse(body, { reportInput: true });
  if (result.success) return { ok: true, readings: [result.data] };
  return schemaError(toProblemDetails(result.error.issues, ['body']), result.error.issues.length, 'Reading');
}

/** A batch push: a non-empty array of at most `maxReadings` readings, valid as a whole or refused as a whole. */
export function parseBatch(body: unknown, schema: ReadingSchema, maxReadings: number): ParseResult {
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
  const readings: Reading[] = new Array(body.length);
  let problems: ProblemDetail[] | undefined;
  let total = 0;
  for (let i = 0; i < body.length; i++) {
    const result = schema.safeParse(body[i], { reportInput: true });
    if (result.success) {
      readings[i] = result.data;
    } else {
      total += result.error.issues.length;
      if ((problems ??= []).length < MAX_REPORTED_PROBLEMS) {
        problems.push(...toProblemDetails(result.error.issues, ['body', i]));
      }
    }
  }
  return problems === undefined ? { ok: true, readings } : schemaError(problems, total, 'Batch');
}
