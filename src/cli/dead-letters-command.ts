import { existsSync } from 'node:fs';
import { SETTINGS } from '../config/settings.js';
import { DeadLetterStore, type Selection } from '../queue/dead-letters.js';
import { queuePath } from '../queue/queue-file.js';
import { accessDataDir } from './data-dir-access.js';

export const DEAD_LETTERS_USAGE = `harbor-gateway dead-letters <command> [options]

  list [--limit N] [--json]     show dead letters (oldest first) with the sink and its reason
  requeue --all | ID...         put them back at the end of the queue (after fixing the cause)
  purge --all | ID...           delete them for good

  --data-dir DIR                the queue directory (default: $DATA_DIR or ${SETTINGS.dataDir.default})
`;

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** Runs the dead-letters command; returns the exit status. */
export async function deadLettersCommand(args: string[], env: NodeJS.ProcessEnv, io: Output): Promise<number> {
  const [command, ...rest] = args;
  let dataDir = env[SETTINGS.dataDir.env] || SETTINGS.dataDir.default!;
  let limit = 100;
  let json = false;
  let all = false;
  const ids: number[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--data-dir') dataDir = rest[++i] ?? '';
    else if (arg === '--limit') limit = Number(rest[++i]);
    else if (arg === '--json') json = true;
    else if (arg === '--all') all = true;
    else if (/^\d+$/.test(arg)) ids.push(Number(arg));
    else {
      io.err(`unknown argument: ${arg}\n\n${DEAD_LETTERS_USAGE}`);
      return 64;
    }
  }
  if (!Number.isInteger(limit) || limit < 1) {
    io.err('--limit must be a positive whole number\n');
    return 64;
  }
  if ((command === 'requeue' || command === 'purge') && all === ids.length > 0) {
    io.err(`${command} needs either --all or dead letter ids\n`);
    return 64;
  }
  if (command !== 'list' && command !== 'requeue' && command !== 'purge') {
    if (command === 'help' || command === undefined) {
      io.out(DEAD_LETTERS_USAGE);
      return command === 'help' ? 0 : 64;
    }
    io.err(DEAD_LETTERS_USAGE);
    return 64;
  }

  if (!existsSync(queuePath(dataDir))) {
    io.err(`no queue at ${queuePath(dataDir)}\n`);
    return 66;
  }
  // Changes go through SQLite's locking beside a running gateway; without one they own DATA_DIR meanwhile.
  const access = command === 'list' ? undefined : await accessDataDir(dataDir, `dead-letters ${command}`, io.err);
  if (typeof access === 'number') return access;
  let store: DeadLetterStore;
  try {
    store = new DeadLetterStore(dataDir);
  } catch (error) {
    if (access?.kind === 'owner') access.release();
    io.err(`${(error as Error).message}\n`);
    return 66;
  }
  try {
    const selection: Selection = all ? 'all' : ids;
    if (command === 'list') {
      const letters = store.list(limit);
      if (json) {
        io.out(
          `${JSON.stringify(letters.map((l) => ({ ...l, receivedAt: new Date(l.receivedMs).toISOString(), failedAt: new Date(l.failedMs).toISOString() })))}\n`,
        );
      } else {
        io.out(`${store.count()} dead letter(s)${letters.length < store.count() ? `, showing ${letters.length}` : ''}\n`);
        for (const l of letters) {
          io.out(
            `#${l.id} ${l.sink} failed ${new Date(l.failedMs).toISOString()}: ${l.reason}\n    ${l.line.replaceAll('\t', ' | ').replaceAll('\n', '\n    ')}\n`,
          );
        }
      }
    } else if (command === 'requeue') {
      io.out(`re-queued ${store.requeue(selection)} dead letter(s); the gateway sends them at its next flush\n`);
    } else {
      io.out(`purged ${store.purge(selection)} dead letter(s)\n`);
    }
    return 0;
  } finally {
    store.close();
    if (access?.kind === 'owner') access.release();
  }
}
