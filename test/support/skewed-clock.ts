import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { aptInstall } from '../../scripts/lib/apt.mjs';

/** Where Debian's libfaketime keeps its multi-threaded library, whatever the architecture. */
function libfaketime(): string {
  const find = () =>
    readdirSync('/usr/lib', { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join('/usr/lib', entry.name, 'faketime', 'libfaketimeMT.so.1'))
      .find((path) => existsSync(path));
  const found = find();
  if (found !== undefined) return found;
  aptInstall(['libfaketime'], '/usr/share/doc/libfaketime');
  const installed = find();
  if (installed === undefined) throw new Error('libfaketime is installed but libfaketimeMT.so.1 was not found under /usr/lib');
  return installed;
}

/**
 * The environment that runs a process with its wall clock `offset` off ("+2h", "-2h"), as a board
 * without a real-time clock boots: libfaketime shifts what the process reads as the time of day,
 * and leaves the monotonic clock (timers) alone.
 */
export function skewedClockEnv(offset: string): Record<string, string> {
  return { LD_PRELOAD: libfaketime(), FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_NO_CACHE: '1' };
}
