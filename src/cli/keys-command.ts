import { SETTINGS } from '../config/settings.js';
import { defaultKeysFile } from '../config/config.js';
import { resolveDataDir } from '../config/data-dir.js';
import {
  DEFAULT_KEY_NAME,
  KEY_NAME_PATTERN,
  MAX_SITE_ID_LENGTH,
  isSiteId,
  SHIP_PREFIX_PATTERN,
  readKeyFile,
  writeKeyFile,
  type ParsedKeyFile,
} from '../keys/key-file.js';
import { generateKey, hashKey } from '../keys/key-hash.js';
import { appliedAtLeast, keyFileVersion, keysAppliedPath, readKeysApplied } from '../keys/keys-applied.js';
import { COMMAND_WAIT_MS, FileLock } from '../queue/data-dir-lock.js';
import { commandUser, recordAudit } from './cli-audit.js';
import { EXIT_IN_USE, runningGateway } from './data-dir-access.js';

/** How long add and revoke wait for a running gateway to apply the change. */
const APPLY_WAIT_MS = 5000;

export const KEYS_USAGE = `harbor-gateway keys <command> [options]

  add NAME [--ship-prefix P] [--site S]
                               create a key for a device and print it once (only its hash is kept);
                               with --ship-prefix the key may only send ships whose id starts with P;
                               with --site (a central gateway's key for one site gateway) it writes
                               as site S only, whatever site its requests name
  list                         show the keys' names and prefixes (never the keys)
  revoke NAME                  delete a key

  --file PATH                  the key file (default: $API_KEYS_FILE, else api-keys in $DATA_DIR or ${SETTINGS.dataDir.default})

add and revoke return once a gateway running on $DATA_DIR has applied the change (its open MQTT
sessions on a revoked key are closed by then), or say that it has not within ${APPLY_WAIT_MS / 1000} s; they are
recorded in the audit trail of $DATA_DIR.
`;

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** What add or revoke changed, for the audit trail. */
interface KeyChange {
  action: 'key_added' | 'key_revoked';
  name: string;
  detail?: string;
}

/**
 * Runs the keys command; returns the exit status. The gateway only reads the key file, and a write
 * replaces it whole (rename), so a running gateway never sees half a file and picks the change up
 * by itself (DATA_DIR/keys-applied.json says when it has); writers among themselves take turns on a
 * lock beside the file, so two commands at once cannot lose each other's key.
 */
export async function keysCommand(args: string[], env: NodeJS.ProcessEnv, io: Output): Promise<number> {
  const [command, ...rest] = args;
  let path = env[SETTINGS.apiKeysFile.env] || defaultKeysFile(resolveDataDir(env[SETTINGS.dataDir.env] || SETTINGS.dataDir.default!));
  let shipPrefix: string | undefined;
  let site: string | undefined;
  const names: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--file') path = rest[++i] ?? '';
    else if (arg === '--ship-prefix') shipPrefix = rest[++i] ?? '';
    else if (arg === '--site') site = rest[++i] ?? '';
    else if (!arg.startsWith('--')) names.push(arg);
    else return usage(io, `unknown option: ${arg}`);
  }
  if (command === 'help' || command === undefined) {
    io.out(KEYS_USAGE);
    return command === 'help' ? 0 : 64;
  }
  if (command !== 'add' && command !== 'revoke') return keysCommandOn(command, path, names, { shipPrefix, site }, io);
  const dataDir = env[SETTINGS.dataDir.env] || SETTINGS.dataDir.default!;
  let lock: FileLock | undefined;
  try {
    lock = await FileLock.take(`${path}.lock`, COMMAND_WAIT_MS);
  } catch (error) {
    io.err(`cannot write ${path}: ${(error as Error).message}\n`);
    return 73;
  }
  if (lock === undefined) {
    io.err(`${path} is being changed by another keys command; try again in a moment\n`);
    return EXIT_IN_USE;
  }
  let change: KeyChange | undefined;
  let status: number;
  try {
    status = keysCommandOn(command, path, names, { shipPrefix, site }, io, (made) => (change = made));
  } finally {
    lock.release();
  }
  if (change === undefined) return status;
  const written = keyFileVersion(path);
  recordAudit(
    dataDir,
    [{ action: change.action, outcome: 'ok', actor: 'cli', origin: commandUser(env), subject: change.name, detail: change.detail }],
    io.err,
  );
  await awaitGateway(dataDir, path, written, io);
  return status;
}

/**
 * Waits until the gateway running on the data directory (if one is) has applied the key file as
 * written, or later; says which it was. Only a gateway of this host is waited for.
 */
async function awaitGateway(dataDir: string, path: string, written: { version: string; mtimeNs: string }, io: Output): Promise<void> {
  const gateway = runningGateway(dataDir);
  if (gateway === undefined) return;
  const marker = keysAppliedPath(dataDir);
  const deadline = Date.now() + APPLY_WAIT_MS;
  while (!appliedAtLeast(readKeysApplied(marker), path, written)) {
    if (Date.now() > deadline || runningGateway(dataDir) === undefined) {
      io.err(
        `the gateway running on ${dataDir} (pid ${gateway.pid}) has not applied it within ${APPLY_WAIT_MS / 1000} s (does it use ${path}?); it does once it reads the file again (SIGHUP, systemctl reload harbor-gateway)\n`,
      );
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  io.err(`the gateway running on ${dataDir} (pid ${gateway.pid}) has applied it\n`);
}

/** The command itself, on the key file as it is now. */
function keysCommandOn(
  command: string,
  path: string,
  names: string[],
  { shipPrefix, site }: { shipPrefix: string | undefined; site: string | undefined },
  io: Output,
  changed: (change: KeyChange) => void = () => undefined,
): number {
  let file: ParsedKeyFile;
  try {
    file = readKeyFile(path);
  } catch (error) {
    io.err(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}\n`);
    return 74;
  }
  for (const problem of file.problems) io.err(`${path}: ${problem} (skipped)\n`);
  switch (command) {
    case 'list': {
      if (names.length > 0 || shipPrefix !== undefined || site !== undefined) return usage(io, 'list takes no names');
      io.out(file.entries.length === 0 ? `no keys in ${path} (API_KEY, if set, is the key named ${DEFAULT_KEY_NAME})\n` : '');
      for (const entry of file.entries)
        io.out(
          `${entry.name}\t${entry.shipPrefix === undefined ? 'all ships' : `ships starting with ${entry.shipPrefix}`}${entry.site === undefined ? '' : `\tsite ${entry.site}`}\n`,
        );
      return 0;
    }
    case 'add': {
      const [name] = names;
      if (name === undefined || names.length > 1) return usage(io, 'add takes exactly one NAME');
      if (!KEY_NAME_PATTERN.test(name)) return usage(io, 'NAME must be 1-64 characters of A-Z a-z 0-9 _ . -');
      if (name === DEFAULT_KEY_NAME) return usage(io, `the name ${DEFAULT_KEY_NAME} is API_KEY's`);
      if (shipPrefix !== undefined && (!SHIP_PREFIX_PATTERN.test(shipPrefix) || shipPrefix.startsWith('site=')))
        return usage(io, '--ship-prefix must be 1-100 characters without spaces or control characters, not starting with site=');
      if (site !== undefined && !isSiteId(site))
        return usage(io, `--site must be 1-${MAX_SITE_ID_LENGTH} characters without control characters or surrounding spaces`);
      if (file.entries.some((e) => e.name === name)) {
        io.err(`a key named ${name} exists; revoke it first to replace it\n`);
        return 65;
      }
      const key = generateKey();
      const entry = {
        name,
        hash: hashKey(key),
        ...(shipPrefix === undefined ? {} : { shipPrefix }),
        ...(site === undefined ? {} : { site }),
      };
      return save(io, path, [...file.entries, entry], () => {
        io.out(`${key}\n`);
        io.err(`key ${name} added to ${path}; it is shown only this once\n`);
        changed({ action: 'key_added', name, detail: describeLimits(shipPrefix, site) });
      });
    }
    case 'revoke': {
      const [name] = names;
      if (name === undefined || names.length > 1 || shipPrefix !== undefined || site !== undefined)
        return usage(io, 'revoke takes exactly one NAME');
      if (!file.entries.some((e) => e.name === name)) {
        io.err(`no key named ${name} in ${path}\n`);
        return 65;
      }
      return save(
        io,
        path,
        file.entries.filter((e) => e.name !== name),
        () => {
          io.err(`key ${name} revoked\n`);
          changed({ action: 'key_revoked', name });
        },
      );
    }
    default:
      return usage(io, `unknown keys command: ${command}`);
  }
}

function save(io: Output, path: string, entries: Parameters<typeof writeKeyFile>[1], done: () => void): number {
  try {
    writeKeyFile(path, entries);
  } catch (error) {
    io.err(`cannot write ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}\n`);
    return 73;
  }
  done();
  return 0;
}

/** "ships starting with crane-, site Pier 4": what a new key may do, for the audit trail. */
const describeLimits = (shipPrefix: string | undefined, site: string | undefined): string =>
  `${shipPrefix === undefined ? 'all ships' : `ships starting with ${shipPrefix}`}${site === undefined ? '' : `, site ${site}`}`;

function usage(io: Output, message: string): number {
  io.err(`${message}\n\n${KEYS_USAGE}`);
  return 64;
}
