import { chownSync, closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { isKeyHash } from './key-hash.js';

/** One device key as the key file holds it: never the key itself, only its hash. */
export interface KeyEntry {
  name: string;
  hash: string;
  /** When set, the key may only send readings whose ship_id starts with this text. */
  shipPrefix?: string;
}

/** Names appear in logs, `/status` and health rows, so they stay short and plain. */
export const KEY_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
/** The name `API_KEY` is known by. */
export const DEFAULT_KEY_NAME = 'default';
/** A prefix is a field of a whitespace-separated line: printable, no spaces. */
export const SHIP_PREFIX_PATTERN = /^[^\s\p{Cc}]{1,100}$/u;

const HEADER = '# Harbor Gateway device keys: name, key hash, optional ship_id prefix. Edit with `harbor-gateway keys`.\n';

export interface ParsedKeyFile {
  entries: KeyEntry[];
  /** One message per line that was skipped, naming the line. */
  problems: string[];
}

/** Reads the lines of a key file; a bad line is skipped and reported, never fatal. */
export function parseKeyFile(text: string): ParsedKeyFile {
  const entries: KeyEntry[] = [];
  const problems: string[] = [];
  const names = new Set<string>();
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const [name, hash, shipPrefix, ...extra] = line.split(/\s+/);
    const where = `line ${index + 1}`;
    if (name === undefined || !KEY_NAME_PATTERN.test(name))
      problems.push(`${where}: the name must be 1-64 characters of A-Z a-z 0-9 _ . -`);
    else if (name === DEFAULT_KEY_NAME) problems.push(`${where}: the name "${DEFAULT_KEY_NAME}" is reserved for API_KEY`);
    else if (names.has(name)) problems.push(`${where}: the name ${name} is used twice`);
    else if (hash === undefined || !isKeyHash(hash))
      problems.push(`${where}: the second field must be a key hash written by \`harbor-gateway keys add\``);
    else if (extra.length > 0) problems.push(`${where}: expected name, hash and an optional ship_id prefix`);
    else {
      names.add(name);
      entries.push(shipPrefix === undefined ? { name, hash } : { name, hash, shipPrefix });
    }
  });
  return { entries, problems };
}

export function formatKeyFile(entries: readonly KeyEntry[]): string {
  return HEADER + entries.map((e) => `${e.name} ${e.hash}${e.shipPrefix === undefined ? '' : ` ${e.shipPrefix}`}\n`).join('');
}

/** The file's entries; a missing file is an empty one. */
export function readKeyFile(path: string): ParsedKeyFile {
  try {
    return parseKeyFile(readFileSync(path, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [], problems: [] };
    throw error;
  }
}

/**
 * Replaces the file atomically (a reload never sees half a file), readable by its owner only. An
 * existing file keeps its owner, so root editing the gateway user's file leaves it readable to the gateway.
 * Durably too: the new content is fsynced before the rename and the directory after it, so a key
 * added or revoked is still added or revoked after a power cut.
 */
export function writeKeyFile(path: string, entries: readonly KeyEntry[]): void {
  const temporary = `${path}.${process.pid}.tmp`;
  fsyncAfter(openSync(temporary, 'w', 0o600), (fd) => writeSync(fd, formatKeyFile(entries)));
  try {
    const owner = statSync(path);
    if (process.getuid?.() === 0) chownSync(temporary, owner.uid, owner.gid);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      rmSync(temporary, { force: true });
      throw error;
    }
  }
  renameSync(temporary, path);
  fsyncAfter(openSync(dirname(path), 'r'), () => undefined);
}

/** Runs fn on fd, then fsyncs and closes it. */
function fsyncAfter(fd: number, fn: (fd: number) => void): void {
  try {
    fn(fd);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
