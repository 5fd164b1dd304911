// SQLite's user_version as a reopened file would read it, without SQLite: the board's scripts have no
// SQLite binding, and opening the file with one would recover its log. A commit that did not reach
// the file by a checkpoint lives only in the write-ahead log beside it (`-wal`), so the newest
// committed copy of page 1 there wins over the file's own header: after a power cut the header may
// still say the old format while the log holds the upgrade, which SQLite applies at the next open.
// The log is read as SQLite recovers it (https://sqlite.org/fileformat2.html#walformat): frames
// count only while their salts match the log's header and their running checksums hold, and only
// up to the last commit frame among them.
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';

const WAL_HEADER = 32;
const FRAME_HEADER = 24;
/** Offset of user_version in the database header (page 1). */
const USER_VERSION = 60;

/**
 * SQLite's running checksum over `data` (a multiple of 8 bytes), continuing from `s`.
 * @param {Buffer} data @param {[number, number]} s @param {boolean} bigEndian
 * @returns {[number, number]}
 */
function checksum(data, s, bigEndian) {
  let [s0, s1] = s;
  for (let i = 0; i < data.length; i += 8) {
    const x0 = bigEndian ? data.readUInt32BE(i) : data.readUInt32LE(i);
    const x1 = bigEndian ? data.readUInt32BE(i + 4) : data.readUInt32LE(i + 4);
    s0 = (s0 + x0 + s1) >>> 0;
    s1 = (s1 + x1 + s0) >>> 0;
  }
  return [s0, s1];
}

/**
 * The user_version of page 1's newest committed copy in a write-ahead log, or undefined when the
 * log holds none. @param {string} walPath
 */
export function walUserVersion(walPath) {
  if (!existsSync(walPath)) return undefined;
  const fd = openSync(walPath, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size < WAL_HEADER) return undefined;
    const header = Buffer.alloc(WAL_HEADER);
    readSync(fd, header, 0, WAL_HEADER, 0);
    const magic = header.readUInt32BE(0);
    if (magic !== 0x377f0682 && magic !== 0x377f0683) return undefined;
    const bigEndian = magic === 0x377f0683;
    const pageSize = header.readUInt32BE(8) === 1 ? 65536 : header.readUInt32BE(8);
    let sum = checksum(header.subarray(0, 24), [0, 0], bigEndian);
    if (sum[0] !== header.readUInt32BE(24) || sum[1] !== header.readUInt32BE(28)) return undefined;
    const frame = Buffer.alloc(FRAME_HEADER + pageSize);
    /** @type {number | undefined} */
    let pending;
    /** @type {number | undefined} */
    let committed;
    for (let at = WAL_HEADER; at + frame.length <= size; at += frame.length) {
      readSync(fd, frame, 0, frame.length, at);
      if (frame.readUInt32BE(8) !== header.readUInt32BE(16) || frame.readUInt32BE(12) !== header.readUInt32BE(20)) break;
      sum = checksum(frame.subarray(0, 8), sum, bigEndian);
      sum = checksum(frame.subarray(FRAME_HEADER), sum, bigEndian);
      if (sum[0] !== frame.readUInt32BE(16) || sum[1] !== frame.readUInt32BE(20)) break;
      if (frame.readUInt32BE(0) === 1) pending = frame.readUInt32BE(FRAME_HEADER + USER_VERSION);
      // A commit frame names the database's size after it; what came before it is committed.
      if (frame.readUInt32BE(4) !== 0) committed = pending ?? committed;
    }
    return committed;
  } finally {
    closeSync(fd);
  }
}

/**
 * A SQLite file's user_version as the next open reads it (its log's newest committed page 1, else
 * its header); undefined without a file. @param {string} path
 */
export function userVersion(path) {
  if (!existsSync(path)) return undefined;
  const fd = openSync(path, 'r');
  let fromHeader;
  try {
    if (fstatSync(fd).size < 100) return undefined;
    const bytes = Buffer.alloc(4);
    readSync(fd, bytes, 0, 4, USER_VERSION);
    fromHeader = bytes.readUInt32BE(0);
  } finally {
    closeSync(fd);
  }
  return walUserVersion(`${path}-wal`) ?? fromHeader;
}
