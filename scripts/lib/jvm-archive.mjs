// Class data sharing for the Java servers the tooling starts (QuestDB, the Kafka broker): the
// classes a server loaded, archived in the cache when it first stops cleanly, and mapped by every
// later start instead of being loaded and verified again (docs/development.md has the figures).
// A JVM that cannot map an archive (another Java, other jars) starts without it.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { cacheDir } from './paths.mjs';

/** `command`'s file: itself when it names one, else the first on PATH. @param {string} command */
function onPath(command) {
  if (command.includes('/')) return command;
  const found = (process.env.PATH ?? '')
    .split(delimiter)
    .map((dir) => join(dir, command))
    .find((path) => existsSync(path));
  if (found === undefined) throw new Error(`${command} is not on PATH`);
  return found;
}

/**
 * The JVM options that use `name`'s archive, or make it at this JVM's exit when there is none yet;
 * call `exited` with the JVM's exit: a JVM that ended by a signal (SIGKILL) wrote no whole archive.
 * The archive is named for the Java binary and the files given (the jars, each with its size and
 * time), so another Java or another version of the server makes one of its own.
 * @param {string} name     what runs: `questdb`, `kafka`
 * @param {string} java     the java binary
 * @param {string[]} files  the jars the JVM loads
 * @returns {{ options: string[], useOnly: string[], exited: (exit: { code: number | null, signal: NodeJS.Signals | null }) => void }}
 *   `useOnly`: the options of a JVM that maps the archive when there is one and makes none (a tool
 *   run before the server, whose classes are not the server's).
 */
export function jvmArchive(name, java, files) {
  const stamp = (/** @type {string} */ path) => {
    const real = realpathSync(path);
    const { size, mtimeMs } = statSync(real);
    return `${real}:${size}:${mtimeMs}`;
  };
  const key = createHash('sha256')
    .update([stamp(onPath(java)), ...files.map(stamp)].join('\n'))
    .digest('hex')
    .slice(0, 16);
  const dir = join(cacheDir(), 'jvm-archives');
  const archive = join(dir, `${name}-${key}.jsa`);
  if (existsSync(archive)) {
    // An archive the JVM cannot map is a warning and a start without it; the warning says nothing useful here.
    const options = [`-XX:SharedArchiveFile=${archive}`, '-Xlog:cds=off', '-Xlog:cds+dynamic=off'];
    return { options, useOnly: options, exited: () => undefined };
  }
  mkdirSync(dir, { recursive: true });
  // A file of this JVM's own, renamed into place: concurrent runs never map half of one.
  const part = `${archive}.${process.pid}-${Math.random().toString(36).slice(2)}.part`;
  return {
    options: [`-XX:ArchiveClassesAtExit=${part}`, '-Xlog:cds=off', '-Xlog:cds+dynamic=off'],
    useOnly: [],
    exited: ({ signal }) => {
      try {
        if (signal === null && existsSync(part)) renameSync(part, archive);
      } finally {
        rmSync(part, { force: true });
      }
    },
  };
}
