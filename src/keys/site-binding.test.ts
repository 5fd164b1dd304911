import { describe, expect, it } from 'vitest';
import { encodeSite } from '../reading/site-id.js';
import { siteOfRequest } from './site-binding.js';

const OWN = 'centre';

describe('the site of a request', () => {
  it('is the site its header names, else the site its key is bound to, else the gateway own (stored as none)', () => {
    expect(siteOfRequest({ name: 'devices' }, encodeSite('pier 7'), OWN)).toEqual({ ok: true, site: 'pier 7' });
    expect(siteOfRequest({ name: 'pier-7', site: 'pier 7' }, undefined, OWN)).toEqual({ ok: true, site: 'pier 7' });
    expect(siteOfRequest({ name: 'devices' }, undefined, OWN)).toEqual({ ok: true, site: undefined });
    expect(siteOfRequest(undefined, encodeSite(OWN), OWN)).toEqual({ ok: true, site: undefined });
  });

  it('lets a key bound to a site write as that site only', () => {
    expect(siteOfRequest({ name: 'pier-7', site: 'pier 7' }, encodeSite('pier 7'), OWN)).toEqual({ ok: true, site: 'pier 7' });
    expect(siteOfRequest({ name: 'pier-7', site: 'pier 7' }, encodeSite('pier 8'), OWN)).toMatchObject({
      ok: false,
      status: 403,
      details: [{ loc: ['header', 'x-harbor-site'], type: 'site_not_allowed' }],
    });
  });

  it('refuses a header that is no site id: bad encoding, control characters, too long, surrounding spaces', () => {
    for (const header of ['%FF', encodeSite('a\u0007b'), encodeSite('x'.repeat(129)), encodeSite(' padded'), '']) {
      expect(siteOfRequest({ name: 'devices' }, header, OWN), header).toMatchObject({ ok: false, status: 400 });
    }
    expect(siteOfRequest({ name: 'devices' }, encodeSite('港 '.trim().repeat(128)), OWN)).toMatchObject({ ok: true });
  });
});
