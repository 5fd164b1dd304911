import { describe, expect, it } from 'vitest';
import { MAX_REASON_LENGTH } from '../dead-letter-reason.js';
import { classifyAnswer, refusedReadings } from './answer.js';

const answer = (status: number, body = '', headers: { retryAfter?: string; location?: string } = {}) =>
  classifyAnswer({ status, body, retryAfter: headers.retryAfter, location: headers.location }, 10);

const problem = (...locs: unknown[][]) =>
  JSON.stringify({ message: 'invalid', details: locs.map((loc) => ({ loc, msg: 'bad', type: 'x' })) });
const indicesOf = (a: ReturnType<typeof answer>) => (a.kind === 'refused_readings' ? a.refused.map((r) => r.index) : []);

describe('classifyAnswer', () => {
  it('takes any 2xx as delivered', () => {
    expect(answer(200).kind).toBe('delivered');
    expect(answer(202).kind).toBe('delivered');
  });

  it('retries 429 and 503 after Retry-After, and other 5xx and 408 after the backoff', () => {
    expect(answer(429, '', { retryAfter: '7' })).toMatchObject({ kind: 'retry', retryAfterMs: 7000 });
    expect(answer(503, 'busy', { retryAfter: '2' })).toMatchObject({
      kind: 'retry',
      retryAfterMs: 2000,
      message: 'upstream answered 503: busy',
    });
    expect(answer(503)).toEqual({ kind: 'retry', message: 'upstream answered 503' });
    expect(answer(500).kind).toBe('retry');
    expect(answer(502).kind).toBe('retry');
    expect(answer(408).kind).toBe('retry');
  });

  it("takes a centre's 409 site_claimed as the site given to another gateway, with the centre's message, and any other 409 as a refusal", () => {
    const claimed = JSON.stringify({
      message: 'Site "pier 7" belongs to another gateway: instance abc forwards under it',
      details: [{ loc: ['header', 'x-harbor-instance'], msg: 'claimed', type: 'site_claimed' }],
    });
    expect(answer(409, claimed)).toEqual({
      kind: 'claimed',
      message: 'Site "pier 7" belongs to another gateway: instance abc forwards under it',
    });
    expect(answer(409, 'conflict').kind).toBe('refused');
  });

  it("makes a wrong key, harbor or URL the operator's problem, redirects included", () => {
    for (const status of [401, 403, 404, 405, 407]) expect(answer(status).kind).toBe('operator');
    expect(answer(301, '', { location: 'https://elsewhere/batch' })).toMatchObject({
      kind: 'operator',
      message: expect.stringMatching(/redirect to https:\/\/elsewhere\/batch/),
    });
  });

  it("dead-letters just the readings a 403 names (a key limited to a ship prefix); a 403 naming none, or the site header, is the operator's", () => {
    const limited = answer(403, problem(['body', 4, 'ship_id'], ['body', 7, 'ship_id']));
    expect(limited.kind).toBe('refused_readings');
    expect(indicesOf(limited)).toEqual([4, 7]);
    expect(answer(403, problem(['header', 'x-harbor-site']))).toMatchObject({ kind: 'operator' });
    expect(answer(403, '{"message":"key expired"}')).toMatchObject({ kind: 'operator' });
  });

  it('halves on 413, and on a 400 that names no reading', () => {
    expect(answer(413).kind).toBe('too_large');
    expect(answer(400, problem(['body']))).toMatchObject({ kind: 'too_large' });
    expect(classifyAnswer({ status: 400, body: 'too large', retryAfter: undefined, location: undefined }, 1).kind).toBe('refused');
  });

  it('refuses just the readings a 400 or 422 names', () => {
    expect(indicesOf(answer(422, problem(['body', 3, 'value'], ['body', 1, 'ship_id'], ['body', 3, 'time'])))).toEqual([1, 3]);
    expect(indicesOf(answer(400, problem(['body', 0, 'value'])))).toEqual([0]);
  });

  it('gives each refused reading the reason its own details give, the same for one cause in any batch', () => {
    const first = JSON.stringify({
      message: 'Validation failed for 3 readings',
      details: [
        { loc: ['body', 0, 'value'], msg: 'Input should be a number', type: 'float_type' },
        { loc: ['body', 2, 'value'], msg: 'Input should be a number', type: 'float_type' },
        { loc: ['body', 2, 'time'], msg: 'Time is in the future', type: 'datetime_future' },
      ],
    });
    const second = JSON.stringify({ detail: [{ loc: ['body', 7, 'value'], msg: 'Input should be a number', type: 'float_type' }] });
    expect(answer(422, first)).toMatchObject({
      kind: 'refused_readings',
      refused: [
        { index: 0, reason: 'upstream answered 422: value: Input should be a number' },
        { index: 2, reason: 'upstream answered 422: value: Input should be a number; time: Time is in the future' },
      ],
    });
    expect(answer(422, second)).toMatchObject({
      refused: [{ index: 7, reason: 'upstream answered 422: value: Input should be a number' }],
    });
  });

  it("refuses the whole batch on a 422 naming no reading and on other 4xx, each reading's reason the answer's message", () => {
    expect(answer(422, '{"message":"no"}')).toEqual({
      kind: 'refused',
      message: 'upstream answered 422: {"message":"no"}',
      reason: 'upstream answered 422: no',
    });
    expect(answer(409, 'conflict')).toEqual({
      kind: 'refused',
      message: 'upstream answered 409: conflict',
      reason: 'upstream answered 409: conflict',
    });
    expect(answer(409, '{"detail":"duplicate batch","request_id":"a1"}')).toMatchObject({
      reason: 'upstream answered 409: duplicate batch',
    });
  });

  it('keeps the answer on one bounded line', () => {
    const { message } = answer(409, `line one\r\nline two ${'x'.repeat(5000)}`) as { message: string };
    expect(message).not.toMatch(/[\r\n]/);
    expect(message.length).toBeLessThan(MAX_REASON_LENGTH + 40);
  });
});

describe('refusedReadings', () => {
  it('reads loc as ["body", index, …] or [index, …] under details or detail, in range only', () => {
    const indices = (body: string) => refusedReadings(422, body, 10).map((r) => r.index);
    expect(indices(problem(['body', 2, 'value'], [4, 'time'], ['body', 99, 'value'], ['body', -1], ['query', 1]))).toEqual([2, 4]);
    expect(refusedReadings(422, JSON.stringify({ detail: [{ loc: ['body', 5, 'value'] }] }), 10)).toEqual([
      { index: 5, reason: 'upstream answered 422: value: refused' },
    ]);
  });

  it('finds nothing in bodies that are not problem details', () => {
    for (const body of ['', 'not json', 'null', '[]', '{"details":"x"}', '{"details":[null,{"loc":"body"}]}']) {
      expect(refusedReadings(422, body, 10)).toEqual([]);
    }
  });
});
