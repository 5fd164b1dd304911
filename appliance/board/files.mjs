// Files the board writes so that a power cut leaves the old content or the new, never a torn or lost
// one, on ext4 (the data partition) and on FAT (the boot partition, which a technician reads on a PC
// after pulling power); and small reads of a file's header. Shared by the board's programs and the
// build on the host (which cannot import appliance/lib: only this folder is on the card).
import { closeSync, fchmodSync, fsyncSync, mkdirSync, openSync, readSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/** Writes a file so that a power cut leaves the old or the new content, never a torn one. */
export function writeAtomic(/** @type {string} */ path, /** @type {string} */ data, mode = 0o644) {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  const fd = openSync(temporary, 'w', mode);
  try {
    fchmodSync(fd, mode);
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, path);
  // On FAT the entry that now names the file is written with the file, not with its folder: without
  // this fsync a power cut can leave the name on the old content's clusters, which the folder's
  // fsync has already marked free (fsck.fat: "Contains a free cluster"; mtools cannot read it).
  syncFile(path);
  syncDirectory(dirname(path));
}

/** A file's content and metadata on disk. */
export function syncFile(/** @type {string} */ path) {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A folder's entries on disk. */
export function syncDirectory(/** @type {string} */ path) {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } catch (error) {
    // A file system that cannot fsync a directory; the file's own fsync has run.
    if (/** @type {NodeJS.ErrnoException} */ (error).code !== 'EINVAL') throw error;
  } finally {
    closeSync(fd);
  }
}

/** `length` bytes of a file from `position` (fewer at its end). */
export function readBytes(/** @type {string} */ path, /** @type {number} */ length, /** @type {number} */ position) {
  const bytes = Buffer.alloc(length);
  const fd = openSync(path, 'r');
  try {
    return bytes.subarray(0, readSync(fd, bytes, 0, length, position));
  } finally {
    closeSync(fd);
  }
}
