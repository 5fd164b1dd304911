import { createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Random bytes in a generated key: 192 bits, far past the 128 bits that make guessing infeasible. */
const KEY_BYTES = 24;
const SALT_BYTES = 16;
const SCHEME = 'hmac-sha256';

/** A new random key for a device, base64url so it survives every header, shell and config file. */
export const generateKey = (): string => randomBytes(KEY_BYTES).toString('base64url');

/**
 * What the key file stores instead of the key: `hmac-sha256$salt$mac`, the key's HMAC-SHA256 under
 * a random salt. Generated keys carry enough entropy that a fast hash cannot be reversed, and a fast
 * hash keeps checking a key cheap on every request.
 */
export function hashKey(key: string): string {
  const salt = randomBytes(SALT_BYTES);
  return `${SCHEME}$${salt.toString('base64url')}$${mac(salt, key).toString('base64url')}`;
}

/** True when the text is a hash this module can check. */
export function isKeyHash(text: string): boolean {
  const [scheme, salt, digest] = text.split('$');
  return scheme === SCHEME && /^[A-Za-z0-9_-]{16,}$/.test(salt ?? '') && /^[A-Za-z0-9_-]{43}$/.test(digest ?? '');
}

/** Constant-time check of a presented key against a stored hash. */
export function keyMatches(hash: string, key: string): boolean {
  const [, salt, digest] = hash.split('$');
  if (salt === undefined || digest === undefined) return false;
  const expected = Buffer.from(digest, 'base64url');
  const actual = mac(Buffer.from(salt, 'base64url'), key);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/**
 * A fixed-length fingerprint of a presented key (SHA-256, base64), to compare or cache it without
 * keeping the key. It runs on every request: the one-shot hash() makes no hash object (a fifth of
 * the time of createHash().update().digest() on a short key).
 */
export const keyDigest = (key: string): string => hash('sha256', key, 'base64');

const mac = (salt: Buffer, key: string): Buffer => createHmac('sha256', salt).update(key, 'utf8').digest();
