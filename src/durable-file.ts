import { closeSync, fchmodSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';

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
 * When an fsync fails, what this call made is removed again, so the next try makes it anew.
 */
export function makeDirectoryDurably(path: string, mode: number): void {
  const first = mkdirSync(path, { recursive: true, mode });
  const made = first === undefined ? undefined : resolve(first);
  try {
    for (let dir = resolve(path); dir !== dirname(dir); dir = dirname(dir)) {
      const parent = dirname(dir);
      const madeHere = made !== undefined && (parent === made || parent.startsWith(`${made}${sep}`));
      fsyncPath(parent, { skipUnreadable: !madeHere });
    }
  } catch (error) {
    if (first !== undefined) rmSync(first, { recursive: true, force: true });
    throw error;
  }
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
