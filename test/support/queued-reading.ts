import fc from 'fast-check';

/** Any reading a queue record can hold: a time in nanoseconds, ids without control characters, any finite double. */
export function queuedReading(maxIdLength: number) {
  const id = fc.string({ unit: 'grapheme', minLength: 1, maxLength: maxIdLength }).filter((s) => !/\p{Cc}/u.test(s));
  return fc.record({
    timeNs: fc.bigInt({ min: 0n, max: 9_183_110_399_999_999_999n }).map(String),
    shipId: id,
    cargoId: id,
    value: fc.double({ noNaN: true, noDefaultInfinity: true }),
  });
}
