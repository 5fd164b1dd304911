import { chownSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';

/**
 * One owner per data directory. The owner holds an exclusive lock on `DATA_DIR/owner.lock` for as
 * long as it runs; the kernel lets go of it when the process ends in any way (exit, crash, kill -9,
 * power cut), so a lock can never outlive its owner and block a restart.
 *
 * The lock is SQLite's own: the file is an empty SQLite database kept in exclusive locking mode,
 * which SQLite implements with POSIX advisory record locks (`fcntl(F_SETLK)`). Those are held by
 * the kernel per inode, so they work on every local file system and across every path to the same
 * directory (bind mounts, containers sharing a volume, a symbolic link); SQLite also keeps track of
 * them inside a process, so two connections of one process (or a worker thread) exclude each other
 * too. They do not reach across machines on a network file system, where SQLite itself is not safe.
 *
 * Who holds the lock is written to `DATA_DIR/owner.json` once it is taken, for the message another
 * process gives; it is never read to decide anything. The lock file itself must never be opened by
 * other means in the owning process: closing any descriptor of a file drops the process's POSIX
 * locks on it.
 */

export interface LockOwner {
  /** `serve`, or the CLI command that holds the lock for a moment (`dead-letters requeue`, …). */
  command: string;
  pid: number;
  hostname: string;
  since: string;
}

export const SERVE = 'serve';

const lockPath = (dir: string): string => join(dir, 'owner.lock');
const ownerPath = (dir: string): string => join(dir, 'owner.json');

/** An exclusive lock on one file, held until `release()` or the end of the process. */
export class FileLock {
  readonly path: string;
  #db: Database.Database | undefined;

  private constructor(path: string, db: Database.Database) {
    this.path = path;
    this.#db = db;
  }

  /** Takes the lock on `path` (created when missing), or returns undefined when another holds it. */
  static tryTake(path: string): FileLock | undefined {
    const fresh = !exists(path);
    const db = new Database(path, { timeout: 0 });
    if (db.readonly) {
      db.close();
      throw new Error(`cannot lock ${path}: the file is not writable for this user`);
    }
    try {
      // No journal file (OFF is refused in better-sqlite3's defensive mode), and once a write
      // transaction took the exclusive lock it is kept until close.
      db.pragma('journal_mode = MEMORY');
      db.pragma('locking_mode = EXCLUSIVE');
      db.exec('BEGIN EXCLUSIVE; COMMIT');
    } catch (error) {
      db.close();
      if ((error as { code?: string }).code === 'SQLITE_BUSY') return undefined;
      throw new Error(`cannot lock ${path}: ${(error as Error).message}`, { cause: error });
    }
    if (fresh) ownLikeDirectory(path);
    return new FileLock(path, db);
  }

  /** Takes the lock, waiting up to `waitMs` for another holder to let go; undefined if it did not. */
  static async take(path: string, waitMs: number): Promise<FileLock | undefined> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const lock = FileLock.tryTake(path);
      if (lock !== undefined || Date.now() >= deadline) return lock;
      await sleep(POLL_MS);
    }
  }

  get held(): boolean {
    return this.#db !== undefined;
  }

  release(): void {
    this.#db?.close();
    this.#db = undefined;
  }
}

/** The owner lock of a data directory, with who holds it. */
export class DataDirLock {
  readonly dataDir: string;
  readonly owner: LockOwner;
  readonly #lock: FileLock;

  private constructor(dataDir: string, owner: LockOwner, lock: FileLock) {
    this.dataDir = dataDir;
    this.owner = owner;
    this.#lock = lock;
  }

  /**
   * Takes the data directory for `command`. A CLI command holds it only for a moment, so while one
   * does (or while a new holder has not yet said who it is), this waits up to `waitMs`; a running
   * gateway is not waited for. Returns the lock, or the owner that keeps it.
   */
  static async take(dataDir: string, command: string, waitMs = COMMAND_WAIT_MS): Promise<DataDirLock | { heldBy: LockOwner | undefined }> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const lock = FileLock.tryTake(lockPath(dataDir));
      if (lock !== undefined) {
        const owner: LockOwner = { command, pid: process.pid, hostname: hostname(), since: new Date().toISOString() };
        try {
          writeOwner(dataDir, owner);
        } catch (error) {
          lock.release();
          throw error;
        }
        return new DataDirLock(dataDir, owner, lock);
      }
      const heldBy = readLockOwner(dataDir);
      if (heldBy?.command === SERVE || Date.now() >= deadline) return { heldBy };
      await sleep(POLL_MS);
    }
  }

  get held(): boolean {
    return this.#lock.held;
  }

  /** Lets go of the directory; the owner record goes first, while it is still ours to remove. */
  release(): void {
    if (!this.#lock.held) return;
    rmSync(ownerPath(this.dataDir), { force: true });
    this.#lock.release();
  }
}

/** Another process owns the data directory: this one must not start. */
export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
  constructor(
    readonly dataDir: string,
    readonly owner: LockOwner | undefined,
  ) {
    super(
      `DATA_DIR ${dataDir} is in use by ${describeOwner(owner)}. Only one gateway may own a data directory: ` +
        'stop the other one first (systemctl stop harbor-gateway, docker compose stop gateway), or give this one its own DATA_DIR',
    );
  }
}

/**
 * Makes the gateway the owner of `dataDir` (created when missing), waiting for a CLI command that
 * holds it for a moment; throws DataDirInUseError when another gateway owns it.
 */
export async function ownDataDir(dataDir: string): Promise<DataDirLock> {
  mkdirSync(dataDir, { recursive: true, mode: 0o750 });
  const taken = await DataDirLock.take(dataDir, SERVE);
  if (taken instanceof DataDirLock) return taken;
  throw new DataDirInUseError(dataDir, taken.heldBy);
}

/** Who said they hold the data directory's lock, if they said so readably. */
export function readLockOwner(dataDir: string): LockOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(ownerPath(dataDir), 'utf8')) as Partial<LockOwner>;
    if (typeof owner.command !== 'string' || typeof owner.pid !== 'number') return undefined;
    return { command: owner.command, pid: owner.pid, hostname: String(owner.hostname ?? ''), since: String(owner.since ?? '') };
  } catch {
    return undefined;
  }
}

/** "serve, pid 1234 on pi-3 since …" or "a process that did not say who it is". */
export function describeOwner(owner: LockOwner | undefined): string {
  if (owner === undefined) return 'another process (it did not record who it is)';
  const where = owner.hostname === hostname() ? '' : ` on host ${owner.hostname} (another machine or container: its own process ids)`;
  return `\`${owner.command}\`, pid ${owner.pid}${where}, since ${owner.since}`;
}

/** How long a CLI command or a starting gateway waits for a CLI command holding the directory. */
export const COMMAND_WAIT_MS = 10_000;
const POLL_MS = 50;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Written whole (rename), so a reader never sees half a record; informative only, so not fsynced. */
function writeOwner(dataDir: string, owner: LockOwner): void {
  const path = ownerPath(dataDir);
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(owner)}\n`, { mode: 0o640 });
  ownLikeDirectory(temporary);
  renameSync(temporary, path);
}

/**
 * A file root made in a service's directory (an operator's `sudo harbor-gateway dead-letters …`)
 * belongs to the directory's owner, as SQLite does for its own journal files: a lock file the
 * service could not open for writing would keep it from starting.
 */
function ownLikeDirectory(path: string): void {
  if (process.getuid?.() !== 0) return;
  const dir = statSync(dirname(path));
  chownSync(path, dir.uid, dir.gid);
}
