import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { CertificateError, loadServerCertificate, type CertificateLocation } from './certificate-store.js';
import { createSelfSignedCertificate } from './self-signed.js';

const location = (overrides: Partial<CertificateLocation>): CertificateLocation => ({
  certFile: undefined,
  keyFile: undefined,
  credentialsDirectory: undefined,
  dataDir: tempDir('certs'),
  ...overrides,
});
const writePair = (dir: string, prefix: string): { cert: string; key: string } => {
  const pair = createSelfSignedCertificate({ commonName: prefix, altNames: [prefix], validDays: 30 });
  writeFileSync(join(dir, `${prefix}-cert`), pair.cert);
  writeFileSync(join(dir, `${prefix}-key`), pair.key);
  return { cert: join(dir, `${prefix}-cert`), key: join(dir, `${prefix}-key`) };
};

describe('loadServerCertificate', () => {
  it('replaces its own self-signed pair when a power cut left it damaged, and refuses a damaged operator file', () => {
    const where = location({});
    const first = loadServerCertificate(where);
    writeFileSync(join(where.dataDir, 'tls', 'cert.pem'), '');
    const second = loadServerCertificate(where);
    expect(second.replacedDamaged).toContain('holds no PEM certificate');
    expect(second.fingerprintSha256).not.toBe(first.fingerprintSha256);
    expect(loadServerCertificate(where).replacedDamaged).toBeUndefined();

    const dir = tempDir('certs');
    const files = writePair(dir, 'operator');
    writeFileSync(files.cert, '');
    expect(() => loadServerCertificate(location({ certFile: files.cert, keyFile: files.key }))).toThrow(CertificateError);
  });

  it('generates a self-signed certificate once and keeps it', () => {
    const where = location({});
    const first = loadServerCertificate(where);
    expect(first.source).toBe('self-signed');
    expect(first.path).toBe(join(where.dataDir, 'tls', 'cert.pem'));
    expect(statSync(join(where.dataDir, 'tls', 'key.pem')).mode & 0o777).toBe(0o600);
    expect(loadServerCertificate(where).fingerprintSha256).toBe(first.fingerprintSha256);
  });

  it('prefers the operator files, then systemd credentials, then the generated one', () => {
    const dir = tempDir('certs');
    const files = writePair(dir, 'operator');
    const credentials = tempDir('certs');
    const credential = writePair(credentials, 'credential');
    writeFileSync(join(credentials, 'tls_cert'), readFileSync(credential.cert));
    writeFileSync(join(credentials, 'tls_key'), readFileSync(credential.key));
    expect(loadServerCertificate(location({ certFile: files.cert, keyFile: files.key, credentialsDirectory: credentials })).source).toBe(
      'file',
    );
    const fromCredentials = loadServerCertificate(location({ credentialsDirectory: credentials }));
    expect(fromCredentials.source).toBe('systemd credential');
    expect(fromCredentials.subjectAltName).toBe('DNS:credential');
    // A credentials directory without TLS credentials falls through to the generated certificate.
    expect(loadServerCertificate(location({ credentialsDirectory: tempDir('certs') })).source).toBe('self-signed');
  });

  it('names the file that is missing, not a certificate, or not the key of the certificate', () => {
    const dir = tempDir('certs');
    const a = writePair(dir, 'a');
    const b = writePair(dir, 'b');
    writeFileSync(join(dir, 'junk'), 'not pem');
    const attempt = (certFile: string, keyFile: string) => () => loadServerCertificate(location({ certFile, keyFile }));
    expect(attempt(join(dir, 'absent'), a.key)).toThrow(
      new CertificateError(`cannot read the TLS certificate ${join(dir, 'absent')}: ENOENT`),
    );
    expect(attempt(join(dir, 'junk'), a.key)).toThrow(`${join(dir, 'junk')} holds no PEM certificate`);
    expect(attempt(a.cert, join(dir, 'junk'))).toThrow(`${join(dir, 'junk')} holds no PEM private key`);
    expect(attempt(a.cert, b.key)).toThrow(`the key in ${b.key} does not belong to the certificate in ${a.cert}`);
  });
});
