import { closeSync, fchmodSync, fsyncSync, mkdirSync, openSync, realpathSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname, isAbsolute, join, sep } from 'node:path';

/**
 * Makes what is written to a file, and the file's name, survive a power cut: one place for the
 * queue, the key file, the TLS certificate and the saved idempotency keys.
 */

/**
 * Fsyncs a file or a directory by its path. Some file systems cannot fsync a directory (EINVAL,
 * ENOTSUP): there a name is as durable as it gets. A failed fsync (EIO) throws. With
 * `skipUnreadable`, a path this process may not open is passed over: it existed before, and
 * whoever made it named it.
 */
export function fsyncPath(path: string, options: { skipUnreadable?: boolean } = {}): void {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (options.skipUnreadable === true && (code === 'EACCES' || code === 'EPERM')) return;
    throw error;
  }
  try {
    fsyncSync(fd);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'ENOTSUP') throw error;
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes a directory and the missing ones above it, and makes the name of every directory on its
 * path durable by an fsync of its parent: without it a power cut can take the directory and all
 * inside it, however well each file was fsynced. A directory already there gets the same fsyncs, as
 * its name may not be durable yet (a start that failed after making it, an operator's `mkdir`).
 * The parents are those of its real path, as the kernel resolved it (a symbolic link followed by
 * `..` leads elsewhere than the text says). Returns that real path. When an fsync fails, what this
 * call made is removed again, so the next try makes it anew.
 */
export function makeDirectoryDurably(path: string, mode: number): string {
  let first: string | undefined;
  try {
    const real = makeEachPart(path, mode, (made) => {
      first ??= made;
    });
    for (let dir = real; dir !== dirname(dir); dir = dirname(dir)) {
      const parent = dirname(dir);
      const madeHere = first !== undefined && (parent === first || parent.startsWith(`${first}${sep}`));
      fsyncPath(parent, { skipUnreadable: !madeHere });
    }
    return real;
  } catch (error) {
    if (first !== undefined) rmSync(first, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Walks `path` a part at a time as the kernel does (a link is followed before a `..` after it),
 * making each missing directory (`made` is told of each); returns the real path.
 */
function makeEachPart(path: string, mode: number, made: (dir: string) => void): string {
  let real = isAbsolute(path) ? sep : realpathSync(process.cwd());
  for (const part of path.split(sep)) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      real = dirname(real);
      continue;
    }
    const next = join(real, part);
    try {
      mkdirSync(next, { mode });
      made(next);
      real = next;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      real = realpathSync(next);
    }
  }
  return real;
}

/**
 * Replaces a file whole: the content is written beside it and fsynced, `beforeRename` may give the
 * new file its owner, then it takes the name and the directory is fsynced. Neither a crash nor a
 * power cut leaves half a file, or a name without its content. A failure removes the file beside.
 */
export function replaceFileDurably(
  path: string,
  content: string,
  mode: number,
  beforeRename: (temporary: string) => void = () => undefined,
): void {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    const fd = openSync(temporary, 'w', mode);
    try {
      fchmodSync(fd, mode); // exactly this mode, whatever the umask
      writeSync(fd, content);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    beforeRename(temporary);
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
  fsyncPath(dirname(path));
}
