import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { IdempotencyKeys, idempotencyFile, parseIdempotencyKey } from './idempotency-keys.js';

const clock = () => {
  let now = 0;
  return { now: () => now, advance: (ms: number) => (now += ms) };
};
const answer = (count: number) => ({ status: 200, body: { status: 'Batch data received and queued', count } });

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('IdempotencyKeys', () => {
  it('answers a repetition with the first answer, per device key, and refuses the key for a different request', async () => {
    const keys = new IdempotencyKeys({ windowMs: 60_000, maxKeys: 10 });
    const first = await keys.claim('buoy-1', 'k1', 'fp-a');
    if (first.kind !== 'first') throw new Error(first.kind);
    first.answered(answer(2));
    expect(await keys.claim('buoy-1', 'k1', 'fp-a')).toEqual({ kind: 'repeat', answer: answer(2) });
    expect(await keys.claim('buoy-1', 'k1', 'fp-b')).toEqual({ kind: 'mismatch' });
    // Another device's key of the same name is its own.
    expect((await keys.claim('buoy-2', 'k1', 'fp-b')).kind).toBe('first');
    expect(keys.repeats).toBe(1);
  });

  it('lets a repetition wait for the first while it is stored, and go on as the first when it was not', async () => {
    const keys = new IdempotencyKeys({ windowMs: 60_000, maxKeys: 10 });
    const first = await keys.claim('d', 'k', 'fp');
    if (first.kind !== 'first') throw new Error(first.kind);
    const waiting = keys.claim('d', 'k', 'fp');
    first.failed();
    const second = await waiting;
    expect(second.kind).toBe('first');
    if (second.kind !== 'first') return;
    const third = keys.claim('d', 'k', 'fp');
    second.answered(answer(1));
    expect(await third).toEqual({ kind: 'repeat', answer: answer(1) });
  });

  it('forgets a key once its window passed, by the monotonic clock it is given', async () => {
    const time = clock();
    const keys = new IdempotencyKeys({ windowMs: 1_000, maxKeys: 10, now: time.now });
    const first = await keys.claim('d', 'k', 'fp');
    if (first.kind === 'first') first.answered(answer(1));
    time.advance(999);
    expect((await keys.claim('d', 'k', 'fp')).kind).toBe('repeat');
    time.advance(1);
    expect((await keys.claim('d', 'k', 'fp')).kind).toBe('first');
  });

  it('holds at most maxKeys, forgetting the oldest first and counting it', async () => {
    const keys = new IdempotencyKeys({ windowMs: 60_000, maxKeys: 3 });
    for (const key of ['a', 'b', 'c', 'd']) {
      const claim = await keys.claim('d', key, 'fp');
      if (claim.kind === 'first') claim.answered(answer(1));
    }
    expect(keys.size).toBe(3);
    expect(keys.forgottenEarly).toBe(1);
    expect((await keys.claim('d', 'a', 'fp')).kind).toBe('first');
    expect((await keys.claim('d', 'd', 'fp')).kind).toBe('repeat');
  });

  it('survives a graceful stop through its file, the time stopped counting against the window', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'harbor-idem-'));
    dirs.push(dir);
    const path = idempotencyFile(dir);
    const time = clock();
    const before = new IdempotencyKeys({ windowMs: 60_000, maxKeys: 10, now: time.now });
    for (const [key, age] of [
      ['old', 30_000],
      ['young', 0],
    ] as const) {
      const claim = await before.claim('d', key, 'fp');
      if (claim.kind === 'first') claim.answered(answer(age));
      time.advance(age === 0 ? 0 : 30_000);
    }
    const pending = await before.claim('d', 'in-flight', 'fp');
    expect(pending.kind).toBe('first');
    expect(before.save(path, 1_000_000)).toBe(2);

    const after = new IdempotencyKeys({ windowMs: 60_000, maxKeys: 10 });
    // Stopped for 40 s: the key 30 s old at the stop is 70 s old now, past the window; the young one has 20 s left.
    expect(after.load(path, 1_040_000)).toBe(1);
    expect(existsSync(path)).toBe(false);
    expect((await after.claim('d', 'young', 'fp')).kind).toBe('repeat');
    expect((await after.claim('d', 'old', 'fp')).kind).toBe('first');
    expect((await after.claim('d', 'in-flight', 'fp')).kind).toBe('first');
  });

  it("covers the request's site: the key reused for another site is refused, and a retry keeps its site across a stop", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'harbor-idem-'));
    dirs.push(dir);
    const keys = new IdempotencyKeys({ windowMs: 60_000, maxKeys: 10 });
    const first = await keys.claim('relay', 'k', 'fp', 'pier-x');
    if (first.kind !== 'first') throw new Error(first.kind);
    first.answered(answer(1));
    expect(await keys.claim('relay', 'k', 'fp', 'pier-y')).toEqual({ kind: 'mismatch' });
    expect(await keys.claim('relay', 'k', 'fp', null)).toEqual({ kind: 'mismatch' });
    expect((await keys.claim('relay', 'k', 'fp', 'pier-x')).kind).toBe('repeat');
    const own = await keys.claim('relay', 'own', 'fp');
    if (own.kind === 'first') own.answered(answer(1));
    keys.save(idempotencyFile(dir), 1_000);

    const after = new IdempotencyKeys({ windowMs: 60_000, maxKeys: 10 });
    expect(after.load(idempotencyFile(dir), 1_000)).toBe(2);
    expect(await after.claim('relay', 'k', 'fp', 'pier-y')).toEqual({ kind: 'mismatch' });
    expect((await after.claim('relay', 'k', 'fp', 'pier-x')).kind).toBe('repeat');
    expect(await after.claim('relay', 'own', 'fp', 'pier-x')).toEqual({ kind: 'mismatch' });
    expect((await after.claim('relay', 'own', 'fp', null)).kind).toBe('repeat');
  });

  it("reads the keys an earlier release saved, which name no site, as matching a repetition of any site's", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'harbor-idem-'));
    dirs.push(dir);
    const saved = { savedAt: 1_000, keys: [{ id: 'relay\nk', fingerprint: 'fp', ageMs: 0, answer: answer(3) }] };
    writeFileSync(idempotencyFile(dir), JSON.stringify(saved));
    const keys = new IdempotencyKeys({ windowMs: 60_000, maxKeys: 10 });
    expect(keys.load(idempotencyFile(dir), 1_000)).toBe(1);
    expect(await keys.claim('relay', 'k', 'fp', 'pier-x')).toEqual({ kind: 'repeat', answer: answer(3) });
    expect(await keys.claim('relay', 'k', 'other', 'pier-x')).toEqual({ kind: 'mismatch' });
  });

  it('starts empty from a damaged file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'harbor-idem-'));
    dirs.push(dir);
    writeFileSync(idempotencyFile(dir), '{"savedAt": 1, "keys": [');
    expect(new IdempotencyKeys({ windowMs: 1, maxKeys: 1 }).load(idempotencyFile(dir))).toBe(0);
    expect(existsSync(idempotencyFile(dir))).toBe(false);
  });
});

describe('parseIdempotencyKey', () => {
  it('takes a token or a quoted structured-field string, and nothing empty, long or outside visible ASCII', () => {
    expect(parseIdempotencyKey('8e03978e-40d5-43e8-bc93-6894a57f9324')).toBe('8e03978e-40d5-43e8-bc93-6894a57f9324');
    expect(parseIdempotencyKey('"abc"')).toBe('abc');
    expect(parseIdempotencyKey('')).toBeUndefined();
    expect(parseIdempotencyKey('""')).toBeUndefined();
    expect(parseIdempotencyKey('   ')).toBeUndefined();
    expect(parseIdempotencyKey('x'.repeat(256))).toBeUndefined();
    expect(parseIdempotencyKey('é')).toBeUndefined();
  });
});
