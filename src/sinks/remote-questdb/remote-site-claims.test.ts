import { describe, expect, it } from 'vitest';
import { type ClaimRow, ownerOf } from './remote-site-claims.js';

const DAY = 86_400_000;
const claim = (timeMs: number, instance: string): ClaimRow => ({ timeMs, instance, kind: 'claim' });
const release = (timeMs: number): ClaimRow => ({ timeMs, instance: null, kind: 'release' });

describe('the owner of a site by its rows at a remote QuestDB', () => {
  it('is the first claim, whatever the order the rows come in; later claims of others do not take it', () => {
    expect(ownerOf([claim(5, 'clone'), claim(1, 'first'), claim(9, 'first')], 7 * DAY, 10)).toEqual({ instance: 'first', lastMs: 9 });
    expect(ownerOf([], 7 * DAY, 10)).toBeUndefined();
    // Two claims at one moment: every gateway picks the same.
    expect(ownerOf([claim(1, 'b'), claim(1, 'a')], 7 * DAY, 10)?.instance).toBe('a');
  });

  it('is nobody after a release, and the next claim after it', () => {
    const rows = [claim(1, 'first'), claim(2, 'clone'), release(3)];
    expect(ownerOf(rows, 7 * DAY, 4)).toBeUndefined();
    expect(ownerOf([...rows, claim(5, 'clone'), claim(6, 'first')], 7 * DAY, 7)?.instance).toBe('clone');
  });

  it("lapses after the owner's silence past the expiry, and the next claim takes the site; never without an expiry", () => {
    const rows = [claim(0, 'first'), claim(1 * DAY, 'clone'), claim(6 * DAY, 'first')];
    expect(ownerOf(rows, 7 * DAY, 12 * DAY)?.instance).toBe('first');
    expect(ownerOf(rows, 7 * DAY, 13 * DAY + 1)).toBeUndefined();
    expect(ownerOf([...rows, claim(14 * DAY, 'clone')], 7 * DAY, 14 * DAY)?.instance).toBe('clone');
    expect(ownerOf([...rows, claim(14 * DAY, 'clone')], 0, 400 * DAY)?.instance).toBe('first');
  });
});
