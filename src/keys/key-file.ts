import { chownSync, readFileSync, statSync } from 'node:fs';
import { replaceFileDurably } from '../durable-file.js';
import { isKeyHash } from './key-hash.js';
import { decodeSite, encodeSite } from '../reading/site-id.js';

export { MAX_SITE_ID_LENGTH, isSiteId } from '../reading/site-id.js';

/** One device key as the key file holds it: never the key itself, only its hash. */
export interface KeyEntry {
  name: string;
  hash: string;
  /** When set, the key may only send readings whose ship_id starts with this text. */
  shipPrefix?: string;
  /** When set, the key writes as this site only (a central gateway's key for one site gateway). */
  site?: string;
}

/** Names appear in logs, `/status` and health rows, so they stay short and plain. */
export const KEY_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
/** The name `API_KEY` is known by. */
export const DEFAULT_KEY_NAME = 'default';
/** A prefix is a field of a whitespace-separated line: printable, no spaces. */
export const SHIP_PREFIX_PATTERN = /^[^\s\p{Cc}]{1,100}$/u;

/** A site's field in the file: `site=` and the site id percent-encoded, so spaces and any letters fit in one field. */
const SITE_FIELD = 'site=';

const HEADER =
  '# Harbor Gateway device keys: name, key hash, optional ship_id prefix, optional site=<site, percent-encoded>. Edit with `harbor-gateway keys`.\n';

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
    const [name, hash, ...options] = line.split(/\s+/);
    const where = `line ${index + 1}`;
    const siteFields = options.filter((o) => o.startsWith(SITE_FIELD));
    const prefixes = options.filter((o) => !o.startsWith(SITE_FIELD));
    const shipPrefix = prefixes[0];
    const site = siteFields.length === 1 ? decodeSite(siteFields[0]!.slice(SITE_FIELD.length)) : undefined;
    if (name === undefined || !KEY_NAME_PATTERN.test(name))
      problems.push(`${where}: the name must be 1-64 characters of A-Z a-z 0-9 _ . -`);
    else if (name === DEFAULT_KEY_NAME) problems.push(`${where}: the name "${DEFAULT_KEY_NAME}" is reserved for API_KEY`);
    else if (names.has(name)) problems.push(`${where}: the name ${name} is used twice`);
    else if (hash === undefined || !isKeyHash(hash))
      problems.push(`${where}: the second field must be a key hash written by \`harbor-gateway keys add\``);
    else if (prefixes.length > 1 || siteFields.length > 1)
      problems.push(`${where}: expected name, hash, an optional ship_id prefix and an optional site=…`);
    else if (siteFields.length === 1 && site === undefined) problems.push(`${where}: the site is not a valid site id`);
    else {
      names.add(name);
      entries.push({ name, hash, ...(shipPrefix === undefined ? {} : { shipPrefix }), ...(site === undefined ? {} : { site }) });
    }
  });
  return { entries, problems };
}

export function formatKeyFile(entries: readonly KeyEntry[]): string {
  const line = (e: KeyEntry): string =>
    `${e.name} ${e.hash}${e.shipPrefix === undefined ? '' : ` ${e.shipPrefix}`}${e.site === undefined ? '' : ` ${SITE_FIELD}${encodeSite(e.site)}`}\n`;
  return HEADER + entries.map(line).join('');
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
  replaceFileDurably(path, formatKeyFile(entries), 0o600, (temporary) => {
    const owner = statSync(path, { throwIfNoEntry: false });
    if (owner !== undefined && process.getuid?.() === 0) chownSync(temporary, owner.uid, owner.gid);
  });
}
