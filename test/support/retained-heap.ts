import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Bytes of V8 heap that `keep` leaves alive, full collections before and after: for tests that a
 * table or cache keeps nothing beyond what it should (a slice keeping its whole string, say).
 */
export function retainedHeapBytes(keep: () => void): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  const before = process.memoryUsage().heapUsed;
  keep();
  gc();
  return process.memoryUsage().heapUsed - before;
}

/** About `bytes` of record text whose every line is `line`, a new string each call. */
export const recordOf = (line: string, bytes: number): string =>
  Array.from({ length: Math.ceil(bytes / (line.length + 1)) }, () => line).join('\n');
