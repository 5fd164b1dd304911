import { X509Certificate, createPrivateKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createSelfSignedCertificate } from './self-signed.js';

describe('createSelfSignedCertificate', () => {
  const now = new Date('2026-11-24T12:00:00Z');
  const pair = createSelfSignedCertificate({
    commonName: 'harbor-3f9a0c',
    altNames: ['harbor-3f9a0c', 'localhost', '127.0.0.1', '::1', 'fe80::1:2', 'localhost'],
    validDays: 3650,
    now,
  });
  const certificate = new X509Certificate(pair.cert);

  it('is signed by its own ECDSA P-256 key', () => {
    const key = createPrivateKey(pair.key);
    expect(key.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(certificate.checkPrivateKey(key)).toBe(true);
    expect(certificate.verify(certificate.publicKey)).toBe(true);
    expect(certificate.issuer).toBe(certificate.subject);
    expect(certificate.ca).toBe(false);
  });

  it('names every host name and address once', () => {
    expect(certificate.subjectAltName).toBe(
      'DNS:harbor-3f9a0c, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, IP Address:FE80:0:0:0:0:0:1:2',
    );
    expect(certificate.checkHost('harbor-3f9a0c')).toBe('harbor-3f9a0c');
    expect(certificate.checkIP('::1')).toBe('::1');
  });

  it('is valid from an hour before its making for the days asked', () => {
    expect(new Date(certificate.validFrom).toISOString()).toBe('2026-11-24T11:00:00.000Z');
    expect(new Date(certificate.validTo).toISOString()).toBe('2036-11-21T12:00:00.000Z');
  });

  it('writes years from 2050 on as GeneralizedTime', () => {
    const late = new X509Certificate(createSelfSignedCertificate({ commonName: 'x', altNames: ['x'], validDays: 365 * 30, now }).cert);
    expect(new Date(late.validTo).getUTCFullYear()).toBe(2056);
  });
});
