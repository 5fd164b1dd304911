import { realpathSync } from 'node:fs';
import { isAbsolute, join, sep } from 'node:path';

/**
 * `DATA_DIR` as the file system resolves it: each part of the path in turn, a symbolic link
 * replaced by its target before a `..` after it is taken, as the kernel does (a textual
 * normalisation would take `link/..` as the directory the link is in). The parts that do not exist
 * yet follow as written: they are directories the gateway makes, with no link among them.
 */
export function resolveDataDir(path: string): string {
  let real = isAbsolute(path) ? sep : realpathSync(process.cwd());
  let existing = true;
  for (const part of path.split(sep)) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      real = join(real, '..');
      continue;
    }
    const next = join(real, part);
    if (existing) {
      try {
        real = realpathSync(next);
        continue;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        existing = false;
      }
    }
    real = next;
  }
  return real;
}
