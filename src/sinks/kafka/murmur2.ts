// Kafka's default partitioner: murmur2 (seed 0x9747b28c) of the key's bytes. The client computes
// it in BigInt; here in 32-bit integer arithmetic, on bytes or on an ASCII range of a string.
const SEED = 0x9747b28c;
const M = 0x5bd1e995;

function mix(h: number, k: number): number {
  k = Math.imul(k, M);
  k ^= k >>> 24;
  return Math.imul(h, M) ^ Math.imul(k, M);
}

function finish(h: number): number {
  h ^= h >>> 13;
  h = Math.imul(h, M);
  return (h ^ (h >>> 15)) >>> 0;
}

/** murmur2 of `key`, unsigned: the hash the client's default partitioner takes modulo the partitions. */
export function murmur2(key: Uint8Array): number {
  const length = key.length;
  let h = SEED ^ length;
  const whole = length & ~3;
  for (let i = 0; i < whole; i += 4) h = mix(h, key[i]! | (key[i + 1]! << 8) | (key[i + 2]! << 16) | (key[i + 3]! << 24));
  const rest = length & 3;
  if (rest > 0) {
    if (rest === 3) h ^= key[whole + 2]! << 16;
    if (rest >= 2) h ^= key[whole + 1]! << 8;
    h = Math.imul(h ^ key[whole]!, M);
  }
  return finish(h);
}

/** murmur2 of the bytes of `text[start, end)`, which must be ASCII: no key buffer made for it. */
export function murmur2Ascii(text: string, start: number, end: number): number {
  const length = end - start;
  let h = SEED ^ length;
  const whole = start + (length & ~3);
  let i = start;
  for (; i < whole; i += 4)
    h = mix(h, text.charCodeAt(i) | (text.charCodeAt(i + 1) << 8) | (text.charCodeAt(i + 2) << 16) | (text.charCodeAt(i + 3) << 24));
  const rest = length & 3;
  if (rest > 0) {
    if (rest === 3) h ^= text.charCodeAt(i + 2) << 16;
    if (rest >= 2) h ^= text.charCodeAt(i + 1) << 8;
    h = Math.imul(h ^ text.charCodeAt(i), M);
  }
  return finish(h);
}
