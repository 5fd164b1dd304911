import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { hostname, networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { makeDirectoryDurably, replaceFileDurably } from '../durable-file.js';
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
  /** Set when the self-signed pair on disk was damaged and replaced by a new one: what was wrong. */
  replacedDamaged?: string;
}

export interface CertificateLocation {
  /** Operator's files (TLS_CERT_FILE, TLS_KEY_FILE): both or neither. */
  certFile: string | undefined;
  keyFile: string | undefined;
  /** $CREDENTIALS_DIRECTORY under systemd: credentials `tls_cert` and `tls_key`. */
  credentialsDirectory: string | undefined;
  dataDir: string;
  /** Read the self-signed pair, never make or replace it: beside a running gateway, which owns it. */
  readOnly?: boolean;
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
  if (existsSync(certPath) && existsSync(keyPath)) {
    try {
      return readPair(certPath, keyPath, 'self-signed');
    } catch (error) {
      if (!(error instanceof CertificateError) || location.readOnly === true) throw error;
      // The gateway's own pair, damaged (a power cut before it reached the card): a new one beats
      // refusing to start, as devices of the SDK do not verify the certificate anyway.
      writeSelfSigned(dir, certPath, keyPath);
      return { ...readPair(certPath, keyPath, 'self-signed'), replacedDamaged: error.message };
    }
  }
  if (location.readOnly === true) throw new CertificateError(`no self-signed certificate in ${dir} yet`);
  writeSelfSigned(dir, certPath, keyPath);
  return readPair(certPath, keyPath, 'self-signed');
}

/** Whether the certificate is the self-signed one in DATA_DIR: no operator files, no credentials. */
export function usesSelfSigned(location: CertificateLocation): boolean {
  if (location.certFile !== undefined && location.keyFile !== undefined) return false;
  const credentials = location.credentialsDirectory;
  return !(credentials !== undefined && existsSync(join(credentials, 'tls_cert')) && existsSync(join(credentials, 'tls_key')));
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
  makeDirectoryDurably(dir, 0o700);
  const pair = createSelfSignedCertificate({ commonName: hostname(), altNames: localNames(), validDays: SELF_SIGNED_VALID_DAYS });
  // The key first, as the pair is complete only with the certificate.
  replaceFileDurably(keyPath, pair.key, 0o600);
  replaceFileDurably(certPath, pair.cert, 0o644);
}
