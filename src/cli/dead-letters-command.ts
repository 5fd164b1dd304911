import { existsSync } from 'node:fs';
import { resolveDataDir } from '../config/data-dir.js';
import { SETTINGS } from '../config/settings.js';
import { DeadLetterStore, type Selection } from '../queue/dead-letters.js';
import { queuePath } from '../queue/queue-file.js';
import { describeSelection } from '../audit/audit-entry.js';
import { commandUser, recordAudit } from './cli-audit.js';
import { accessDataDir } from './data-dir-access.js';

export const DEAD_LETTERS_USAGE = `harbor-gateway dead-letters <command> [options]

  list [--limit N] [--json]     show dead letters (oldest first) with the sink and its reason
  requeue --all | ID...         put them back at the end of the queue (after fixing the cause), each
                                for the sink that refused it only: the other sinks delivered it
  purge --all | ID...           delete them for good

  --sink NAME                   only the letters of this sink (questdb, upstream, kafka, remote-questdb):
                                with --all, all of that sink's letters
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
  let sink: string | undefined;
  const ids: number[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--data-dir') dataDir = rest[++i] ?? '';
    else if (arg === '--limit') limit = Number(rest[++i]);
    else if (arg === '--json') json = true;
    else if (arg === '--all') all = true;
    else if (arg === '--sink') sink = rest[++i] ?? '';
    else if (/^\d+$/.test(arg)) ids.push(Number(arg));
    else {
      io.err(`unknown argument: ${arg}\n\n${DEAD_LETTERS_USAGE}`);
      return 64;
    }
  }
  dataDir = resolveDataDir(dataDir);
  if (sink === '') {
    io.err('--sink needs the name of a sink\n');
    return 64;
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
  const audit = (action: 'dead_letters_requeued' | 'dead_letters_purged', detail: string) =>
    recordAudit(
      dataDir,
      [{ action, outcome: 'ok', actor: 'cli', origin: commandUser(env), subject: describeSelection(all ? 'all' : ids, sink), detail }],
      io.err,
    );
  try {
    const selection: Selection = { ids: all ? 'all' : ids, ...(sink === undefined ? {} : { sink }) };
    if (command === 'list') {
      const letters = store.list(limit, 0, sink);
      if (json) {
        io.out(
          `${JSON.stringify(letters.map((l) => ({ ...l, receivedAt: new Date(l.receivedMs).toISOString(), failedAt: new Date(l.failedMs).toISOString() })))}\n`,
        );
      } else {
        io.out(`${store.count()} dead letter(s)${letters.length < store.count() ? `, showing ${letters.length}` : ''}\n`);
        for (const l of letters) {
          io.out(
            `#${l.id} ${l.sink}${l.site === null ? '' : ` (site ${l.site})`} failed ${new Date(l.failedMs).toISOString()}: ${l.reason}\n    ${l.line.replaceAll('\t', ' | ').replaceAll('\n', '\n    ')}\n`,
          );
        }
      }
    } else if (command === 'requeue') {
      const bySink = store.requeue(selection);
      const total = [...bySink.values()].reduce((sum, n) => sum + n, 0);
      const where = [...bySink].map(([name, n]) => `${n} to ${name}`).join(', ');
      io.out(`re-queued ${total} dead letter(s)${where === '' ? '' : ` (${where})`}; the gateway sends them at its next flush\n`);
      audit('dead_letters_requeued', `${total} re-queued${where === '' ? '' : ` (${where})`}`);
    } else {
      const purged = store.purge(selection);
      io.out(`purged ${purged} dead letter(s)\n`);
      audit('dead_letters_purged', `${purged} purged`);
    }
    return 0;
  } finally {
    store.close();
    if (access?.kind === 'owner') access.release();
  }
}
