import { chownSync, existsSync, renameSync, statSync } from 'node:fs';
import { open as openFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { AuditAction, AuditEntry, AuditOutcome } from './audit-entry.js';

/** The trail's file in the data directory. */
export const auditPath = (dataDir: string): string => join(dataDir, 'audit.db');

/** Entries kept at most; the oldest go first... */
export const MAX_ENTRIES = 10_000;
/** ...and of refused or throttled logins at most this many, so a flood cannot push out the rest. */
export const MAX_REPEATED_ENTRIES = 5_000;

/** An entry as stored, with its id (ids only grow). */
export interface StoredAuditEntry extends AuditEntry {
  id: number;
}

interface Row {
  id: number;
  at_ms: number;
  first_ms: number;
  action: string;
  outcome: string;
  actor: string;
  origin: string | null;
  subject: string | null;
  detail: string | null;
  count: number;
}

const FORMAT = 1;

export interface AuditFileOptions {
  busyTimeoutMs?: number;
  /**
   * `full` (commands): each append is synced before it returns. `deferred` (the gateway): an append
   * returns once written, and `syncLog()` makes it durable off the event loop, so a device's
   * request never waits behind the trail's disk.
   */
  sync?: 'full' | 'deferred';
}

/**
 * The audit trail on disk: one SQLite file that the gateway and the command line (and through it
 * the appliance's tools) write side by side, each append one transaction under SQLite's locking.
 * Bounded by entries, not time. A later release may add columns, never rename or remove one, so
 * that every release reads and writes every release's file.
 */
export class AuditFile {
  readonly #db: Database.Database;
  readonly #insert: Database.Statement;
  readonly #trim: Database.Statement<[number]>;
  readonly #trimRepeated: Database.Statement<[number]>;
  readonly #path: string;

  private constructor(db: Database.Database, path: string) {
    this.#db = db;
    this.#path = path;
    this.#insert = db.prepare(
      `INSERT INTO audit (at_ms, first_ms, action, outcome, actor, origin, subject, detail, count, writer)
       VALUES (@atMs, @firstMs, @action, @outcome, @actor, @origin, @subject, @detail, @count, @writer)`,
    );
    this.#trim = db.prepare('DELETE FROM audit WHERE id IN (SELECT id FROM audit ORDER BY id DESC LIMIT -1 OFFSET ?)');
    this.#trimRepeated = db.prepare(
      `DELETE FROM audit WHERE id IN
         (SELECT id FROM audit WHERE action = 'login' AND outcome <> 'ok' ORDER BY id DESC LIMIT -1 OFFSET ?)`,
    );
  }

  /**
   * Opens the trail of a data directory, making it when missing. A file SQLite cannot read is set
   * aside (`audit.db.unreadable-…`) and a new one made: the trail must never keep the gateway from running.
   */
  static open(dataDir: string, options: AuditFileOptions = {}): AuditFile {
    const path = auditPath(dataDir);
    const fresh = !existsSync(path);
    try {
      return AuditFile.#openAt(path, fresh, options);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== 'SQLITE_NOTADB' && code !== 'SQLITE_CORRUPT') throw error;
      renameSync(path, `${path}.unreadable-${new Date().toISOString().replace(/[:.]/g, '-')}`);
      return AuditFile.#openAt(path, true, options);
    }
  }

  static #openAt(path: string, fresh: boolean, options: AuditFileOptions): AuditFile {
    const db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000 });
    try {
      // A command's append is synced before it returns: an entry it reported stays reported after
      // a power cut. The gateway's are synced by syncLog(), off the event loop; a checkpoint (the
      // log at 1,000 pages, or the last connection closing) syncs what it copies in both modes.
      db.pragma('journal_mode = WAL');
      db.pragma(options.sync === 'deferred' ? 'synchronous = NORMAL' : 'synchronous = FULL');
      db.pragma('journal_size_limit = 262144');
      // A few pages suffice: appends touch the last ones, pages read the newest entries.
      db.pragma('cache_size = -256');
      db.exec(`CREATE TABLE IF NOT EXISTS audit (
        id       INTEGER PRIMARY KEY,
        at_ms    INTEGER NOT NULL,
        first_ms INTEGER NOT NULL,
        action   TEXT    NOT NULL,
        outcome  TEXT    NOT NULL,
        actor    TEXT    NOT NULL,
        origin   TEXT,
        subject  TEXT,
        detail   TEXT,
        count    INTEGER NOT NULL,
        -- the process that wrote it (random per run), so the gateway knows which entries came from others
        writer   TEXT    NOT NULL
      )`);
      if ((db.pragma('user_version', { simple: true }) as number) < FORMAT) db.pragma(`user_version = ${FORMAT}`);
    } catch (error) {
      db.close();
      throw error;
    }
    // Root (an operator's sudo, the appliance's tools) makes it for the gateway's user, as the key file.
    if (fresh && process.getuid?.() === 0) {
      const dir = statSync(dirname(path));
      chownSync(path, dir.uid, dir.gid);
    }
    return new AuditFile(db, path);
  }

  /** Appends entries in one transaction and trims to the bounds; returns the id of the last. */
  append(entries: readonly AuditEntry[], writer: string): number {
    let last = 0;
    this.#db.transaction(() => {
      for (const entry of entries) last = Number(this.#insert.run({ ...entry, writer }).lastInsertRowid);
      this.#trimRepeated.run(MAX_REPEATED_ENTRIES);
      this.#trim.run(MAX_ENTRIES);
    })();
    return last;
  }

  /** The newest entries, newest first. */
  latest(limit: number): StoredAuditEntry[] {
    return this.#db.prepare<[number], Row>('SELECT * FROM audit ORDER BY id DESC LIMIT ?').all(limit).map(entryOfRow);
  }

  /**
   * Entries after `id` written by others than `writer`, oldest first, and the last id of the file,
   * read together: what comes after that id is new at the next look.
   */
  othersAfter(id: number, writer: string): { entries: StoredAuditEntry[]; lastId: number } {
    return this.#db.transaction(() => ({
      entries: this.#db
        .prepare<[number, string], Row>('SELECT * FROM audit WHERE id > ? AND writer <> ? ORDER BY id')
        .all(id, writer)
        .map(entryOfRow),
      lastId: this.lastId(),
    }))();
  }

  lastId(): number {
    return (this.#db.prepare('SELECT COALESCE(MAX(id), 0) AS id FROM audit').get() as { id: number }).id;
  }

  /** Makes what was appended durable, in the thread pool: the write-ahead log synced to the card. */
  async syncLog(): Promise<void> {
    const log = await openFile(`${this.#path}-wal`, 'r');
    try {
      await log.datasync();
    } finally {
      await log.close();
    }
  }

  close(): void {
    this.#db.close();
  }
}

const entryOfRow = (row: Row): StoredAuditEntry => ({
  id: row.id,
  atMs: row.at_ms,
  firstMs: row.first_ms,
  action: row.action as AuditAction,
  outcome: row.outcome as AuditOutcome,
  actor: row.actor,
  origin: row.origin,
  subject: row.subject,
  detail: row.detail,
  count: row.count,
});
