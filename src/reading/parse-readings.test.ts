import { describe, expect, it } from 'vitest';
import { MAX_REPORTED_PROBLEMS, parseBatch, parseSingle } from './parse-readings.js';
import { readingSchema } from './reading-schema.js';

const schema = { schema: readingSchema({ maxIdLength: 100 }), limits: { maxIdLength: 100 } };
const valid = { time: '2026-01-31T12:00:00.000Z', ship_id: 'ship-1', cargo_id: 'temperature', value: 21.5 };

const problems = (result: ReturnType<typeof parseSingle>) => {
  if (result.ok) throw new Error('expected a refusal');
  return result;
};

describe('parseSingle', () => {
  it('accepts a reading, ignores unknown fields and keeps values exactly', () => {
    const result = parseSingle({ ...valid, value: 23.700000762939453, extra: { nested: true } }, schema);
    expect(result).toEqual({
      ok: true,
      readings: [{ timeNs: `${Date.parse(valid.time)}000000`, shipId: 'ship-1', cargoId: 'temperature', value: 23.700000762939453 }],
    });
  });

  it('treats a missing or null time as "use the receive time"', () => {
    for (const time of [undefined, null]) {
      const result = parseSingle({ ...valid, time }, schema);
      expect(result.ok && result.readings[0]!.timeNs).toBeUndefined();
    }
  });

  it('keeps -0 and extreme doubles', () => {
    for (const value of [-0, 5e-324, -1.7976931348623157e308, 2 ** 53 + 2]) {
      const result = parseSingle({ ...valid, value }, schema);
      expect(result.ok && Object.is(result.readings[0]!.value, value)).toBe(true);
    }
  });

  it.each([
    [[], 'object_type'],
    ['text', 'object_type'],
    [null, 'object_type'],
    [42, 'object_type'],
  ])('refuses the top-level value %j with 400', (body, type) => {
    const result = problems(parseSingle(body, schema));
    expect(result.refusal).toBe('malformed');
    expect(result.details).toEqual([{ loc: ['body'], msg: expect.any(String), type }]);
  });

  it.each([
    [{ ship_id: undefined }, ['body', 'ship_id'], 'missing'],
    [{ cargo_id: '' }, ['body', 'cargo_id'], 'string_too_short'],
    [{ ship_id: 'x'.repeat(101) }, ['body', 'ship_id'], 'string_too_long'],
    [{ ship_id: 'tab\there' }, ['body', 'ship_id'], 'string_control_character'],
    [{ ship_id: 'nul\u0000' }, ['body', 'ship_id'], 'string_control_character'],
    [{ cargo_id: 'c1\u0085' }, ['body', 'cargo_id'], 'string_control_character'],
    [{ ship_id: 'lone\ud800' }, ['body', 'ship_id'], 'string_unicode'],
    [{ ship_id: 7 }, ['body', 'ship_id'], 'string_type'],
    [{ value: undefined }, ['body', 'value'], 'missing'],
    [{ value: null }, ['body', 'value'], 'number_type'],
    [{ value: '21.5' }, ['body', 'value'], 'number_type'],
    [{ value: 'NaN' }, ['body', 'value'], 'number_type'],
    [{ value: true }, ['body', 'value'], 'number_type'],
    [{ value: [1] }, ['body', 'value'], 'number_type'],
    [{ value: { v: 1 } }, ['body', 'value'], 'number_type'],
    [{ value: Infinity }, ['body', 'value'], 'finite_number'],
    [{ value: NaN }, ['body', 'value'], 'finite_number'],
    [{ time: 1767225600 }, ['body', 'time'], 'datetime_type'],
    [{ time: '2026-02-30T00:00:00Z' }, ['body', 'time'], 'datetime_value'],
    [{ time: '1960-01-01T00:00:00Z' }, ['body', 'time'], 'datetime_range'],
  ])('refuses %j with 422 at %j as %s', (change, loc, type) => {
    const result = problems(parseSingle({ ...valid, ...change }, schema));
    expect(result.refusal).toBe('invalid');
    expect(result.details).toEqual([{ loc, msg: expect.any(String), type }]);
  });

  it('counts ids in characters, not UTF-16 units', () => {
    expect(parseSingle({ ...valid, ship_id: '😀'.repeat(100) }, schema).ok).toBe(true);
    expect(parseSingle({ ...valid, ship_id: '😀'.repeat(101) }, schema).ok).toBe(false);
  });
});

describe('parseBatch', () => {
  it('accepts readings that differ in time, device and metric', () => {
    const result = parseBatch([valid, { ...valid, ship_id: 'ship-2', time: undefined }], schema, 10);
    expect(result.ok && result.readings.map((r) => r.shipId)).toEqual(['ship-1', 'ship-2']);
  });

  it('refuses an empty batch, too many readings and non-arrays with 400', () => {
    expect(problems(parseBatch([], schema, 10))).toMatchObject({ refusal: 'malformed', details: [{ type: 'too_short' }] });
    expect(problems(parseBatch(new Array(11).fill(valid), schema, 10))).toMatchObject({
      refusal: 'malformed',
      details: [{ type: 'too_long' }],
    });
    expect(problems(parseBatch(valid, schema, 10))).toMatchObject({ refusal: 'malformed', details: [{ type: 'array_type' }] });
  });

  it('names the batch index and field of every problem', () => {
    const result = problems(parseBatch([valid, { ...valid, value: 'x' }, 5, { ...valid, ship_id: '' }], schema, 10));
    expect(result.refusal).toBe('invalid');
    expect(result.details.map((d) => [d.loc, d.type])).toEqual([
      [['body', 1, 'value'], 'number_type'],
      [['body', 2], 'object_type'],
      [['body', 3, 'ship_id'], 'string_too_short'],
    ]);
    expect(result.message).toContain('3 problems');
  });

  it('caps the details of a large bad batch but counts them all', () => {
    const result = problems(parseBatch(new Array(500).fill({}), schema, 1000));
    expect(result.details).toHaveLength(MAX_REPORTED_PROBLEMS);
    expect(result.message).toContain('1500 problems');
  });
});
