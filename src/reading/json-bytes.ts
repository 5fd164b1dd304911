import { isUtf8 } from 'node:buffer';
import type { Loc, ReadingIssue } from './reading-issues.js';

export type JsonBytesResult = { ok: true; json: unknown } | { ok: false; message: string; details: ReadingIssue[] };

/** Bytes as JSON, refused with the reason when they are not UTF-8 or not JSON: an HTTP body's rules, for any transport. */
export function parseJsonBytes(bytes: Buffer, loc: Loc, what = 'Body'): JsonBytesResult {
  if (!isUtf8(bytes)) {
    return {
      ok: false,
      message: `${what} is not valid UTF-8`,
      details: [{ loc, msg: `${what} must be UTF-8 encoded JSON`, type: 'utf8_invalid' }],
    };
  }
  try {
    return { ok: true, json: JSON.parse(bytes.toString('utf8')) };
  } catch (error) {
    const reason = bytes.length === 0 ? `${what} is empty` : (error as Error).message;
    return { ok: false, message: `${what} is not valid JSON`, details: [{ loc, msg: reason, type: 'json_invalid' }] };
  }
}
