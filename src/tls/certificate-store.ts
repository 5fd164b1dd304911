import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { hostname, networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { createSelfSignedCertificate, type PemPair } from './self-signed.js';

export type CertificateSource = 'file' | 'systemd credential' | 'self-signed';

export interface ServerCertificate extends PemPair {
  source: CertificateSource;
  /** Where the certificate was read from. */
  path: string;
  /** SHA-256 of the DER certificate, colon-separated hex, as browsers and `openssl x509 -fingerprint -sha256` show it. */
  fingerprintSha256: string;
  subjectAltName: string;
  notAfter: string;
}

export interface CertificateLocation {
  /** Operator's files (TLS_CERT_FILE, TLS_KEY_FILE): both or neither. */
  certFile: string | undefined;
  keyFile: string | undefined;
  /** $CREDENTIALS_DIRECTORY under systemd: credentials `tls_cert` and `tls_key`. */
  credentialsDirectory: string | undefined;
  dataDir: string;
}

export class CertificateError extends Error {
  override name = 'CertificateError';
}

const SELF_SIGNED_VALID_DAYS = 3650;

/** Where the generated certificate is kept: with the queue, so it survives upgrades and keeps its fingerprint. */
export const selfSignedDir = (dataDir: string): string => join(dataDir, 'tls');

/**
 * Reads the server certificate: the operator's files, else systemd credentials, else the
 * self-signed one in DATA_DIR/tls, generated on first use. Throws CertificateError naming the file.
 */
export function loadServerCertificate(location: CertificateLocation): ServerCertificate {
  if (location.certFile !== undefined && location.keyFile !== undefined) {
    return readPair(location.certFile, location.keyFile, 'file');
  }
  const credentials = location.credentialsDirectory;
  if (credentials !== undefined && existsSync(join(credentials, 'tls_cert')) && existsSync(join(credentials, 'tls_key'))) {
    return readPair(join(credentials, 'tls_cert'), join(credentials, 'tls_key'), 'systemd credential');
  }
  const dir = selfSignedDir(location.dataDir);
  const certPath = join(dir, 'cert.pem');
  const keyPath = join(dir, 'key.pem');
  if (!existsSync(certPath) || !existsSync(keyPath)) writeSelfSigned(dir, certPath, keyPath);
  return readPair(certPath, keyPath, 'self-signed');
}

function readPair(certPath: string, keyPath: string, source: CertificateSource): ServerCertificate {
  const cert = readText(certPath, 'certificate');
  const key = readText(keyPath, 'private key');
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new CertificateError(`${certPath} holds no PEM certificate`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new CertificateError(`${keyPath} holds no PEM private key (or it is encrypted)`);
  }
  if (!x509.checkPrivateKey(privateKey))
    throw new CertificateError(`the key in ${keyPath} does not belong to the certificate in ${certPath}`);
  return {
    cert,
    key,
    source,
    path: certPath,
    fingerprintSha256: x509.fingerprint256,
    subjectAltName: x509.subjectAltName ?? '',
    notAfter: new Date(x509.validTo).toISOString(),
  };
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new CertificateError(`cannot read the TLS ${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
  }
}

/** The names a device may use for this gateway: host name, localhost and every address of the host. */
function localNames(): string[] {
  const addresses = Object.values(networkInterfaces())
    .flat()
    .flatMap((info) => (info === undefined || info.address.includes('%') ? [] : [info.address]));
  return [hostname(), 'localhost', '127.0.0.1', '::1', ...addresses];
}

function writeSelfSigned(dir: string, certPath: string, keyPath: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pair = createSelfSignedCertificate({ commonName: hostname(), altNames: localNames(), validDays: SELF_SIGNED_VALID_DAYS });
  // Written beside and renamed, so a crash never leaves half a key; the key first, as the pair is complete only with the certificate.
  const writeAtomically = (path: string, content: string, mode: number): void => {
    const temporary = `${path}.${process.pid}.tmp`;
    writeFileSync(temporary, content, { mode });
    chmodSync(temporary, mode);
    renameSync(temporary, path);
  };
  writeAtomically(keyPath, pair.key, 0o600);
  writeAtomically(certPath, pair.cert, 0o644);
}
