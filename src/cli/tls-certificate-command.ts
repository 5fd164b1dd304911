import { mkdirSync } from 'node:fs';
import { resolveDataDir } from '../config/data-dir.js';
import { SETTINGS } from '../config/settings.js';
import { CertificateError, loadServerCertificate, usesSelfSigned, type CertificateLocation } from '../tls/certificate-store.js';
import { accessDataDir, type DataDirAccess } from './data-dir-access.js';

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

/**
 * Prints the certificate HTTPS serves, as `serve` would find it (creating the self-signed one when
 * none is configured), so a technician can compare its fingerprint with what a device sees.
 * `--fingerprint` prints the fingerprint alone. Returns the exit status. The self-signed pair is made
 * by whoever owns DATA_DIR: beside a running gateway this only reads the one the gateway serves.
 */
export async function tlsCertificateCommand(args: string[], env: NodeJS.ProcessEnv, io: Output): Promise<number> {
  const onlyFingerprint = args[0] === '--fingerprint';
  if (args.length > (onlyFingerprint ? 1 : 0)) {
    io.err('usage: harbor-gateway tls-certificate [--fingerprint]\n');
    return 64;
  }
  const setting = (name: string): string | undefined => (env[name] === '' ? undefined : env[name]);
  const location: CertificateLocation = {
    certFile: setting(SETTINGS.tlsCertFile.env),
    keyFile: setting(SETTINGS.tlsKeyFile.env),
    credentialsDirectory: setting('CREDENTIALS_DIRECTORY'),
    dataDir: resolveDataDir(setting(SETTINGS.dataDir.env) ?? SETTINGS.dataDir.default!),
  };
  let access: DataDirAccess | undefined;
  if (usesSelfSigned(location)) {
    mkdirSync(location.dataDir, { recursive: true, mode: 0o750 });
    const found = await accessDataDir(location.dataDir, 'tls-certificate', io.err);
    if (typeof found === 'number') return found;
    access = found;
  }
  try {
    const certificate = loadServerCertificate({ ...location, readOnly: access?.kind === 'beside' });
    io.out(
      onlyFingerprint
        ? `${certificate.fingerprintSha256}\n`
        : [
            `fingerprint (SHA-256): ${certificate.fingerprintSha256}`,
            `source: ${certificate.source}`,
            `certificate: ${certificate.path}`,
            `names: ${certificate.subjectAltName}`,
            `valid until: ${certificate.notAfter}`,
            '',
          ].join('\n'),
    );
    return 0;
  } catch (error) {
    if (!(error instanceof CertificateError)) throw error;
    io.err(`harbor-gateway: ${error.message}\n`);
    return 78;
  } finally {
    if (access?.kind === 'owner') access.release();
  }
}
