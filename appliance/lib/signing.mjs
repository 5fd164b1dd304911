// The key pair that signs update bundles, and the keyring an image trusts.
//
// A release is signed with the release signing key, which only the release manager holds (offline,
// never in this repository or on a board): --signing-key and --signing-cert name it, --keyring the
// CA certificate images carry in /etc/rauc/keyring.pem. A board installs only bundles whose
// signature chains to that certificate. --test-keys makes a throwaway CA and signing key instead,
// kept in ~/.cache/harbor-gateway/appliance/test-keys so that test images and test bundles match;
// an image built with them says so in its manifest and release file, and is not for the field.
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { applianceCache, output, run } from './host.mjs';

/** @typedef {{ key: string, cert: string, keyring: string, test: boolean, fingerprint: string }} Signing */

/**
 * A CA and a signing certificate it issued, made with openssl into dir (once).
 * @param {string} dir
 * @param {string} name   shown in the certificates' subjects
 */
export function makeKeyPair(dir, name) {
  if (existsSync(join(dir, 'ca.cert.pem'))) return dir;
  const partial = `${dir}.${process.pid}.part`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true, mode: 0o700 });
  const at = (/** @type {string} */ file) => join(partial, file);
  const days = '3650';
  // P-256 keys: what RAUC's OpenSSL signs and verifies everywhere, and small.
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run(
    'openssl',
    [
      'req',
      '-x509',
      ...newKey,
      '-keyout',
      at('ca.key.pem'),
      '-out',
      at('ca.cert.pem'),
      '-days',
      days,
      '-subj',
      `/O=Harbor Gateway/CN=${name} CA`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    { quiet: true },
  );
  run(
    'openssl',
    [
      'req',
      ...newKey,
      '-keyout',
      at('signing.key.pem'),
      '-out',
      at('signing.csr.pem'),
      '-subj',
      `/O=Harbor Gateway/CN=${name} bundle signing`,
    ],
    { quiet: true },
  );
  writeFileSync(at('signing.ext'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n');
  run(
    'openssl',
    [
      'x509',
      '-req',
      '-in',
      at('signing.csr.pem'),
      '-CA',
      at('ca.cert.pem'),
      '-CAkey',
      at('ca.key.pem'),
      '-CAcreateserial',
      '-out',
      at('signing.cert.pem'),
      '-days',
      days,
      '-extfile',
      at('signing.ext'),
    ],
    { quiet: true },
  );
  renameSync(partial, dir);
  return dir;
}

/** SHA-256 fingerprint of a certificate, as openssl prints it. */
export const certFingerprint = (/** @type {string} */ cert) =>
  output('openssl', ['x509', '-in', cert, '-noout', '-fingerprint', '-sha256']).replace(/^.*=/, '');

/**
 * The signing material of a build: the release's (all three paths) or the test keys.
 * @param {{ key?: string, cert?: string, keyring?: string, testKeys: boolean }} options
 * @returns {Signing}
 */
export function signingMaterial({ key, cert, keyring, testKeys }) {
  if (testKeys) {
    const dir = makeKeyPair(join(applianceCache(), 'test-keys'), 'TEST KEY, not for the field');
    const ca = join(dir, 'ca.cert.pem');
    return {
      key: join(dir, 'signing.key.pem'),
      cert: join(dir, 'signing.cert.pem'),
      keyring: ca,
      test: true,
      fingerprint: certFingerprint(ca),
    };
  }
  if (key === undefined || cert === undefined || keyring === undefined) {
    throw new Error(
      'an image and its bundle need the release signing key: --signing-key KEY --signing-cert CERT --keyring CA (docs/appliance.md, "Signing keys"); --test-keys makes throwaway ones for trying the build',
    );
  }
  for (const path of [key, cert, keyring]) if (!existsSync(path)) throw new Error(`${path} does not exist`);
  return { key, cert, keyring, test: false, fingerprint: certFingerprint(keyring) };
}
