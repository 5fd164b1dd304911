import * as z from 'zod';
import { fastValidate } from './fast-validate.js';
import { MAX_REPORTED_PROBLEMS, type ParseResult, type Validator } from './parse-readings.js';
import { toReadingIssues, type Loc, type ReadingIssue } from './reading-issues.js';
import type { Reading } from './reading-schema.js';
import type { ReceiveClock } from './receive-clock.js';

/** Fields of a fix that describe it rather than being measurements. */
const NOT_MEASUREMENTS = new Set(['ship_id', 'time']);

/**
 * The schema of record for one GPS fix as the monitoring agent posts it: `ship_id`, an optional
 * RFC 3339 `time`, and a position in range. Any further fields are allowed; the finite numbers
 * among them are stored beside the position.
 */
const fixSchema = z.object({
  latitude: z.number().min(-90, 'Latitude must be between -90 and 90').max(90, 'Latitude must be between -90 and 90'),
  longitude: z.number().min(-180, 'Longitude must be between -180 and 180').max(180, 'Longitude must be between -180 and 180'),
});

const kind = (input: unknown): string => (input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input);

/**
 * One fix or an array of fixes to readings: latitude, longitude and every other finite number of
 * the object become readings of that ship, all with the fix's time (the receive time when it has
 * none), so a dashboard can pair them on (ship_id, time). Valid as a whole or refused as a whole.
 */
export function parseGpsFixes(body: unknown, validator: Validator, maxFixes: number, clock: ReceiveClock): ParseResult {
  const single = !Array.isArray(body);
  const fixes: unknown[] = single ? [body] : (body as unknown[]);
  const shapeError = (message: string, msg: string, type: string): ParseResult => ({
    ok: false,
    refusal: 'malformed',
    message,
    details: [{ loc: ['body'], msg, type }],
  });
  if (fixes.length === 0) return shapeError('No GPS fixes in the body', 'Send one fix object or a non-empty array of them', 'too_short');
  if (fixes.length > maxFixes) {
    return shapeError(
      `Body has ${fixes.length} fixes; at most ${maxFixes} are accepted per request`,
      `At most ${maxFixes} fixes`,
      'too_long',
    );
  }
  validator.limits.window?.refresh();
  const readings: Reading[] = [];
  const shipLocs: Loc[] = [];
  const problems: ReadingIssue[] = [];
  /** The fixes without a time: where their readings are, and their ship. */
  const untimed: UntimedFix[] = [];
  let total = 0;
  for (let i = 0; i < fixes.length; i++) {
    const prefix: Loc = single ? ['body'] : ['body', i];
    const fix = fixes[i];
    if (typeof fix !== 'object' || fix === null || Array.isArray(fix)) {
      total += 1;
      problems.push({ loc: prefix, msg: `A GPS fix should be a JSON object, not ${kind(fix)}`, type: 'object_type' });
      continue;
    }
    const found = fixReadings(fix as Record<string, unknown>, validator, prefix);
    if (!found.ok) {
      total += found.problems.length;
      problems.push(...found.problems);
      continue;
    }
    const from = readings.length;
    for (const reading of found.readings) {
      readings.push(reading);
      shipLocs.push([...prefix, 'ship_id']);
    }
    if (found.readings[0]!.timeNs === undefined) untimed.push({ from, to: readings.length, ship: found.readings[0]!.shipId });
  }
  if (problems.length > 0) {
    return {
      ok: false,
      refusal: 'invalid',
      message: `GPS fix does not match the schema (${total} problem${total === 1 ? '' : 's'})`,
      details: problems.slice(0, MAX_REPORTED_PROBLEMS),
    };
  }
  if (untimed.length > 0) stampReceiveTimes(readings, untimed, clock);
  return { ok: true, readings, shipLocs };
}

/**
 * The fixes without a time share the request's receive time, all readings of a fix alike; a ship's
 * second fix in the request takes the next nanosecond, its third the one after, and so on.
 */
function stampReceiveTimes(readings: Reading[], untimed: readonly UntimedFix[], clock: ReceiveClock): void {
  const fixesOf = new Map<string, number>();
  const offsets = untimed.map(({ ship }) => {
    const before = fixesOf.get(ship) ?? 0;
    fixesOf.set(ship, before + 1);
    return before;
  });
  const times = clock.reserve(Math.max(...fixesOf.values()));
  untimed.forEach(({ from, to }, i) => {
    const timeNs = times.ns(offsets[i]);
    for (let j = from; j < to; j++) readings[j] = { ...readings[j]!, timeNs };
  });
}

interface UntimedFix {
  from: number;
  to: number;
  ship: string;
}

type FixReadings = { ok: true; readings: Reading[] } | { ok: false; problems: ReadingIssue[] };

function fixReadings(fix: Record<string, unknown>, { schema, limits }: Validator, prefix: Loc): FixReadings {
  const problems: ReadingIssue[] = [];
  const position = fixSchema.safeParse(fix, { reportInput: true });
  if (!position.success) problems.push(...toReadingIssues(position.error.issues, prefix));
  // ship_id and time are checked once, on the latitude reading; a field name must be a valid cargo_id.
  const readings: Reading[] = [];
  for (const [field, value] of Object.entries(fix)) {
    if (NOT_MEASUREMENTS.has(field) || typeof value !== 'number' || !Number.isFinite(value)) continue;
    const candidate = { time: fix['time'], ship_id: fix['ship_id'], cargo_id: field, value };
    const reading = fastValidate(candidate, limits);
    if (reading !== undefined) {
      readings.push(reading);
      continue;
    }
    const result = schema.safeParse(candidate, { reportInput: true });
    if (result.success) continue;
    for (const detail of toReadingIssues(result.error.issues, prefix)) {
      const at = detail.loc[detail.loc.length - 1];
      if (at === 'cargo_id')
        problems.push({ ...detail, loc: [...prefix, field], msg: `Field name cannot be stored as a cargo_id: ${detail.msg}` });
      else if (!problems.some((p) => p.loc.length === detail.loc.length && p.loc.every((part, j) => part === detail.loc[j])))
        problems.push(detail);
    }
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, readings };
}
