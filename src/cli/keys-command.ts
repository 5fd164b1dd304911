import { SETTINGS } from '../config/settings.js';
import { defaultKeysFile } from '../config/config.js';
import {
  DEFAULT_KEY_NAME,
  KEY_NAME_PATTERN,
  SHIP_PREFIX_PATTERN,
  readKeyFile,
  writeKeyFile,
  type ParsedKeyFile,
} from '../keys/key-file.js';
import { generateKey, hashKey } from '../keys/key-hash.js';
import { COMMAND_WAIT_MS, FileLock } from '../queue/data-dir-lock.js';
import { EXIT_IN_USE } from './data-dir-access.js';

export const KEYS_USAGE = `harbor-gateway keys <command> [options]

  add NAME [--ship-prefix P]   create a key for a device and print it once (only its hash is kept);
                               with --ship-prefix the key may only send ships whose id starts with P
  list                         show the keys' names and prefixes (never the keys)
  revoke NAME                  delete a key; a running gateway stops accepting it within seconds

  --file PATH                  the key file (default: $API_KEYS_FILE, else api-keys in $DATA_DIR or ${SETTINGS.dataDir.default})
`;

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

/**
 * Runs the keys command; returns the exit status. The gateway only reads the key file, and a write
 * replaces it whole (rename), so a running gateway never sees half a file and picks the change up
 * by itself; writers among themselves take turns on a lock beside the file, so two commands at
 * once cannot lose each other's key.
 */
export async function keysCommand(args: string[], env: NodeJS.ProcessEnv, io: Output): Promise<number> {
  const [command, ...rest] = args;
  let path = env[SETTINGS.apiKeysFile.env] || defaultKeysFile(env[SETTINGS.dataDir.env] || SETTINGS.dataDir.default!);
  let shipPrefix: string | undefined;
  const names: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--file') path = rest[++i] ?? '';
    else if (arg === '--ship-prefix') shipPrefix = rest[++i] ?? '';
    else if (!arg.startsWith('--')) names.push(arg);
    else return usage(io, `unknown option: ${arg}`);
  }
  if (command === 'help' || command === undefined) {
    io.out(KEYS_USAGE);
    return command === 'help' ? 0 : 64;
  }
  if (command !== 'add' && command !== 'revoke') return keysCommandOn(command, path, names, shipPrefix, io);
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
  try {
    return keysCommandOn(command, path, names, shipPrefix, io);
  } finally {
    lock.release();
  }
}

/** The command itself, on the key file as it is now. */
function keysCommandOn(command: string, path: string, names: string[], shipPrefix: string | undefined, io: Output): number {
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
      if (names.length > 0 || shipPrefix !== undefined) return usage(io, 'list takes no names');
      io.out(file.entries.length === 0 ? `no keys in ${path} (API_KEY, if set, is the key named ${DEFAULT_KEY_NAME})\n` : '');
      for (const entry of file.entries)
        io.out(`${entry.name}\t${entry.shipPrefix === undefined ? 'all ships' : `ships starting with ${entry.shipPrefix}`}\n`);
      return 0;
    }
    case 'add': {
      const [name] = names;
      if (name === undefined || names.length > 1) return usage(io, 'add takes exactly one NAME');
      if (!KEY_NAME_PATTERN.test(name)) return usage(io, 'NAME must be 1-64 characters of A-Z a-z 0-9 _ . -');
      if (name === DEFAULT_KEY_NAME) return usage(io, `the name ${DEFAULT_KEY_NAME} is API_KEY's`);
      if (shipPrefix !== undefined && !SHIP_PREFIX_PATTERN.test(shipPrefix))
        return usage(io, '--ship-prefix must be 1-100 characters without spaces or control characters');
      if (file.entries.some((e) => e.name === name)) {
        io.err(`a key named ${name} exists; revoke it first to replace it\n`);
        return 65;
      }
      const key = generateKey();
      return save(io, path, [...file.entries, { name, hash: hashKey(key), ...(shipPrefix === undefined ? {} : { shipPrefix }) }], () => {
        io.out(`${key}\n`);
        io.err(`key ${name} added to ${path}; it is shown only this once\n`);
      });
    }
    case 'revoke': {
      const [name] = names;
      if (name === undefined || names.length > 1 || shipPrefix !== undefined) return usage(io, 'revoke takes exactly one NAME');
      if (!file.entries.some((e) => e.name === name)) {
        io.err(`no key named ${name} in ${path}\n`);
        return 65;
      }
      return save(
        io,
        path,
        file.entries.filter((e) => e.name !== name),
        () => io.err(`key ${name} revoked\n`),
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

function usage(io: Output, message: string): number {
  io.err(`${message}\n\n${KEYS_USAGE}`);
  return 64;
}
