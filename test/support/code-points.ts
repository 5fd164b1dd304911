import fc from 'fast-check';

/**
 * A string unit of any code point but the surrogates: what fast-check's `unit: 'binary'` generates
 * (the same index over the same two ranges), without the table of all 1.1 million code points that
 * fast-check builds on its first use, seconds for each test file.
 */
export const anyCodePoint = fc.nat({ max: 0x10ffff - 0x800 }).map((n) => String.fromCodePoint(n < 0xd800 ? n : n + 0x800));
