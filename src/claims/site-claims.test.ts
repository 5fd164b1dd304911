import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { ACTIVE_MS, type ClaimEvent, SiteClaims, claimsFile } from './site-claims.js';

const DAY = 86_400_000;
const opened: SiteClaims[] = [];
afterEach(() => {
  for (const claims of opened.splice(0)) claims.close();
});

function claimsAt(dataDir: string, expiryDays = 7) {
  let now = 1_000_000;
  const events: ClaimEvent[] = [];
  const claims = new SiteClaims({ dataDir, expiryMs: expiryDays * DAY, now: () => now, onEvent: (e) => events.push(e) });
  opened.push(claims);
  return { claims, events, advance: (ms: number) => (now += ms), now: () => now };
}

describe('site claims at a centre', () => {
  it('give a site to the first instance that forwards under it and refuse another, overwriting nothing', () => {
    const dataDir = tempDir('claims');
    const { claims, events } = claimsAt(dataDir);
    expect(existsSync(claimsFile(dataDir))).toBe(false);
    expect(claims.check('pier-7', 'first', 'pier-7-gw')).toEqual({ ok: true });
    expect(existsSync(claimsFile(dataDir))).toBe(true);
    const refused = claims.check('pier-7', 'clone', 'pier-7-gw');
    expect(refused).toMatchObject({ ok: false, owner: { site: 'pier-7', instance: 'first', gateway: 'pier-7-gw' } });
    claims.check('pier-7', 'clone');
    expect(claims.check('pier-7', 'first')).toEqual({ ok: true });
    // Another site is another claim.
    expect(claims.check('pier-8', 'clone')).toEqual({ ok: true });
    expect(claims.view()).toEqual({
      sites: 2,
      conflicts: [
        expect.objectContaining({
          site: 'pier-7',
          instance: 'clone',
          refusedRequests: 2,
          owner: expect.objectContaining({ instance: 'first' }),
        }),
      ],
    });
    // Said once when the conflict starts, not at every refusal.
    expect(events.map((e) => e.kind)).toEqual(['claimed', 'refused', 'claimed']);
  });

  it('keep claims and conflicts across a restart', () => {
    const dataDir = tempDir('claims');
    const before = claimsAt(dataDir);
    before.claims.check('pier-7', 'first');
    before.claims.check('pier-7', 'clone');
    before.claims.close();
    opened.pop();
    const after = claimsAt(dataDir);
    expect(after.claims.check('pier-7', 'clone')).toMatchObject({ ok: false });
    expect(after.claims.list()).toMatchObject({
      claims: [{ site: 'pier-7', instance: 'first' }],
      conflicts: [{ site: 'pier-7', instance: 'clone', refusedRequests: 2 }],
    });
  });

  it('lapse when the owner was silent past the expiry, and the claimant takes the site', () => {
    const { claims, events, advance } = claimsAt(tempDir('claims'), 7);
    claims.check('pier-7', 'first');
    advance(6 * DAY);
    claims.check('pier-7', 'first');
    claims.flush();
    advance(6 * DAY);
    // Heard 6 days ago: still the owner's.
    expect(claims.check('pier-7', 'replacement')).toMatchObject({ ok: false });
    advance(1 * DAY + 1);
    expect(claims.check('pier-7', 'replacement')).toEqual({ ok: true });
    expect(claims.check('pier-7', 'first')).toMatchObject({ ok: false, owner: { instance: 'replacement' } });
    expect(events.find((e) => e.kind === 'claimed' && e.took !== undefined)).toMatchObject({
      claim: { instance: 'replacement' },
      took: { instance: 'first' },
    });
  });

  it('never lapse with an expiry of 0', () => {
    const { claims, advance } = claimsAt(tempDir('claims'), 0);
    claims.check('pier-7', 'first');
    advance(10_000 * DAY);
    expect(claims.check('pier-7', 'clone')).toMatchObject({ ok: false });
  });

  it('released from another process (the command line), go to the next instance that forwards', () => {
    const dataDir = tempDir('claims');
    const centre = claimsAt(dataDir);
    centre.claims.check('pier-7', 'first');
    centre.claims.check('pier-7', 'clone');
    const cli = new SiteClaims({ dataDir, expiryMs: 7 * DAY });
    expect(cli.release('pier-7')).toMatchObject({ site: 'pier-7', instance: 'first' });
    expect(cli.release('pier-7')).toBeUndefined();
    cli.close();
    expect(centre.claims.check('pier-7', 'clone')).toEqual({ ok: true });
    expect(centre.claims.check('pier-7', 'first')).toMatchObject({ ok: false, owner: { instance: 'clone' } });
    expect(centre.claims.view().conflicts.map((c) => c.instance)).toEqual(['first']);
  });

  it("are taken for the centre's own site: its devices write under it, and a gateway forwarding under it is refused", () => {
    const dataDir = tempDir('claims');
    const before = claimsAt(dataDir);
    before.claims.check('centre', 'a-site-named-so');
    before.claims.close();
    opened.pop();
    const events: ClaimEvent[] = [];
    const own = { site: 'centre', instance: 'centre-instance', gateway: 'centre-gw' };
    const claims = new SiteClaims({ dataDir, expiryMs: DAY, own, onEvent: (e) => events.push(e) });
    opened.push(claims);
    expect(events).toEqual([expect.objectContaining({ kind: 'claimed', took: expect.objectContaining({ instance: 'a-site-named-so' }) })]);
    expect(claims.check('centre', 'a-site-named-so')).toMatchObject({ ok: false, owner: { instance: 'centre-instance' } });
    // Taken when the file is first needed: a gateway that is nobody's centre makes none.
    const site = tempDir('claims');
    new SiteClaims({ dataDir: site, expiryMs: DAY, own }).close();
    expect(existsSync(claimsFile(site))).toBe(false);
  });

  it('show a conflict for ACTIVE_MS after its last refusal, and keep a few claimants per site', () => {
    const { claims, advance } = claimsAt(tempDir('claims'));
    claims.check('pier-7', 'first');
    for (let i = 0; i < 40; i++) claims.check('pier-7', `random-${i}`);
    expect(claims.view().conflicts).toHaveLength(16);
    expect(claims.list().conflicts).toHaveLength(16);
    advance(ACTIVE_MS + 1);
    expect(claims.view().conflicts).toEqual([]);
  });
});
