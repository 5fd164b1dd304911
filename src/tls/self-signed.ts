import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { isIP } from 'node:net';
import * as der from './der.js';

const OID = {
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
};

export interface SelfSignedOptions {
  commonName: string;
  /** Host names and IP addresses the certificate names (subjectAltName). */
  altNames: string[];
  validDays: number;
  now?: Date;
}

export interface PemPair {
  cert: string;
  key: string;
}

function ipBytes(address: string): Buffer {
  if (isIP(address) === 4) return Buffer.from(address.split('.').map(Number));
  // IPv6: expand "::" and write eight 16-bit groups.
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return Buffer.concat(groups.map((group) => Buffer.from(group.padStart(4, '0'), 'hex')));
}

function altName(name: string): Buffer {
  // Context tags of GeneralName: [2] dNSName, [7] iPAddress (RFC 5280 4.2.1.6).
  return isIP(name) === 0 ? der.tlv(0x82, Buffer.from(name, 'ascii')) : der.tlv(0x87, ipBytes(name));
}

const extension = (oid: string, critical: boolean, value: Buffer): Buffer =>
  der.sequence(der.objectIdentifier(oid), ...(critical ? [der.boolean(true)] : []), der.octetString(value));

/**
 * A self-signed ECDSA P-256 server certificate: the curve and signature every TLS stack of the
 * device family (mbedTLS on ESP32) verifies, or skips verifying, quickly.
 */
export function createSelfSignedCertificate(options: SelfSignedOptions): PemPair {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const now = options.now ?? new Date();
  // Backdated an hour so a device whose clock lags a little still accepts it.
  const notBefore = new Date(now.getTime() - 3600_000);
  const notAfter = new Date(now.getTime() + options.validDays * 86_400_000);
  const name = der.sequence(
    der.set(der.sequence(der.objectIdentifier(OID.organization), der.utf8String('Harbor Gateway'))),
    der.set(der.sequence(der.objectIdentifier(OID.commonName), der.utf8String(options.commonName))),
  );
  const signatureAlgorithm = der.sequence(der.objectIdentifier(OID.ecdsaWithSha256));
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const extensions = der.sequence(
    extension(OID.basicConstraints, true, der.sequence()),
    // digitalSignature only: ECDHE key exchange signs with the key.
    extension(OID.keyUsage, true, der.tlv(0x03, Buffer.from([7, 0x80]))),
    extension(OID.extKeyUsage, false, der.sequence(der.objectIdentifier(OID.serverAuth))),
    extension(OID.subjectAltName, false, der.sequence(...[...new Set(options.altNames)].map(altName))),
  );
  const tbs = der.sequence(
    der.explicit(0, der.unsignedInteger(Buffer.from([2]))),
    der.unsignedInteger(serial),
    signatureAlgorithm,
    name,
    der.sequence(der.time(notBefore), der.time(notAfter)),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    der.explicit(3, extensions),
  );
  const signature = sign('sha256', tbs, { key: privateKey, dsaEncoding: 'der' });
  const certificate = der.sequence(tbs, signatureAlgorithm, der.bitString(signature));
  const body = certificate.toString('base64').replace(/.{1,64}/g, '$&\n');
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${body}-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  };
}
