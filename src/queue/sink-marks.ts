import type Database from 'better-sqlite3';
import { dropSegment, listSegments, readProgress, type Progress, type Totals } from './queue-file.js';
import { forgetSinkState } from './sink-state.js';
import { writeAhead } from './sink-ahead.js';

/**
 * Each sink's own progress mark (`sink_progress`), and the common mark (`progress`) they have all
 * passed. Records behind the common mark are counted as removed in the ledger, in the transaction
 * that moves it, and their segments are dropped: the queue holds what any sink still needs.
 */

export interface SinkRegistration {
  name: string;
  /** A sink new to this queue starts at the oldest record still queued instead of after the newest. */
  backfill: boolean;
}

export interface Registered {
  added: { name: string; at: Progress }[];
  removed: string[];
  /** What no configured sink needs any more once the removed ones let go: taken off the queue. */
  released: Totals;
}

export const compareMarks = (a: Progress, b: Progress): number => a.segment - b.segment || a.lastId - b.lastId;

export function readSinkMarks(db: Database.Database): Map<string, Progress> {
  const rows = db.prepare<[], [string, number, number]>('SELECT name, segment, last_id FROM sink_progress').raw(true).all();
  return new Map(rows.map(([name, segment, lastId]) => [name, { segment, lastId }]));
}

export function writeSinkMark(db: Database.Database, name: string, mark: Progress): void {
  db.prepare<[string, number, number]>('INSERT OR REPLACE INTO sink_progress (name, segment, last_id) VALUES (?, ?, ?)').run(
    name,
    mark.segment,
    mark.lastId,
  );
}

/** After the newest record: where a sink added to a running site starts. */
function endOfQueue(db: Database.Database): Progress {
  const segment = listSegments(db).at(-1) ?? readProgress(db).segment;
  const lastId = db.prepare<[], number | null>(`SELECT MAX(id) FROM segment_${segment}`).pluck().get() ?? 0;
  return { segment, lastId };
}

/** Records, readings and bytes after `from` up to and including `to`. */
export function totalsBetween(db: Database.Database, from: Progress, to: Progress): Totals {
  const totals = { records: 0, readings: 0, bytes: 0 };
  for (const segment of listSegments(db)) {
    if (segment < from.segment || segment > to.segment) continue;
    const row = db
      .prepare<[number, number], [number, number, number]>(
        `SELECT COUNT(*), COALESCE(SUM(readings), 0), COALESCE(SUM(bytes), 0) FROM segment_${segment} WHERE id > ? AND id <= ?`,
      )
      .raw(true)
      .get(segment === from.segment ? from.lastId : 0, segment === to.segment ? to.lastId : Number.MAX_SAFE_INTEGER)!;
    totals.records += row[0];
    totals.readings += row[1];
    totals.bytes += row[2];
  }
  return totals;
}

/**
 * Moves the common mark to the slowest sink's mark, counting what it passes as removed. Call in the
 * transaction that moved a sink's mark; `dropPassedSegments` after it.
 */
export function advanceCommonMark(db: Database.Database): { common: Progress; passed: Totals } {
  const common = readProgress(db);
  const none = { records: 0, readings: 0, bytes: 0 };
  const marks = [...readSinkMarks(db).values()];
  if (marks.length === 0) return { common, passed: none };
  const slowest = marks.reduce((a, b) => (compareMarks(a, b) <= 0 ? a : b));
  if (compareMarks(slowest, common) <= 0) return { common, passed: none };
  const passed = totalsBetween(db, common, slowest);
  db.prepare<[number, number, number]>(
    'UPDATE ledger SET removed_records = removed_records + ?, removed_readings = removed_readings + ?, removed_bytes = removed_bytes + ? WHERE id = 1',
  ).run(passed.records, passed.readings, passed.bytes);
  db.prepare<[number, number]>('UPDATE progress SET segment = ?, last_id = ? WHERE id = 1').run(slowest.segment, slowest.lastId);
  return { common: slowest, passed };
}

/** A sink's kept mark (its replay window's start), or undefined when it keeps nothing. */
export function readKeptMark(db: Database.Database, name: string): Progress | undefined {
  const row = db.prepare<[string], [number, number]>('SELECT segment, last_id FROM sink_kept WHERE name = ?').raw(true).get(name);
  return row === undefined ? undefined : { segment: row[0], lastId: row[1] };
}

export function writeKeptMark(db: Database.Database, name: string, mark: Progress): void {
  db.prepare<[string, number, number]>('INSERT OR REPLACE INTO sink_kept (name, segment, last_id) VALUES (?, ?, ?)').run(
    name,
    mark.segment,
    mark.lastId,
  );
}

/**
 * Drops the segments wholly behind the common mark and every sink's kept mark. The records a
 * replay window keeps are not counted as queued (the ledger follows the common mark): they are
 * delivered, and only their bytes stay on disk until the window has passed them.
 */
export function dropPassedSegments(db: Database.Database, common: Progress): void {
  const kept = db.prepare<[], number | null>('SELECT MIN(segment) FROM sink_kept').pluck().get() ?? common.segment;
  const floor = Math.min(common.segment, kept);
  for (const segment of listSegments(db)) {
    if (segment < floor) dropSegment(db, segment);
  }
}

/** The slowest of the common mark and the kept marks: nothing after it may go. */
export function slowestMark(db: Database.Database, common: Progress = readProgress(db)): Progress {
  const kept = db.prepare<[], [number, number]>('SELECT segment, last_id FROM sink_kept').raw(true).all();
  return kept.map(([segment, lastId]) => ({ segment, lastId })).reduce((a, b) => (compareMarks(a, b) <= 0 ? a : b), common);
}

/**
 * Makes the queue's marks those of the configured sinks: a new sink starts after the newest record
 * (or at the oldest queued one when it backfills); a sink no longer configured lets go of what it
 * held. Nothing another sink delivered is sent to it again.
 */
export function registerSinks(db: Database.Database, sinks: readonly SinkRegistration[]): Registered {
  if (sinks.length === 0) throw new Error('at least one sink must be configured');
  const result = db
    .transaction((): Registered & { common: Progress } => {
      const marks = readSinkMarks(db);
      const wanted = new Set(sinks.map((s) => s.name));
      const added: Registered['added'] = [];
      for (const sink of sinks) {
        if (marks.has(sink.name)) continue;
        const at = sink.backfill ? readProgress(db) : endOfQueue(db);
        writeSinkMark(db, sink.name, at);
        added.push({ name: sink.name, at });
      }
      const removed = [...marks.keys()].filter((name) => !wanted.has(name));
      for (const name of removed) {
        db.prepare('DELETE FROM sink_progress WHERE name = ?').run(name);
        db.prepare('DELETE FROM sink_kept WHERE name = ?').run(name);
        forgetSinkState(db, name);
        writeAhead(db, name, undefined);
      }
      const { common, passed } = advanceCommonMark(db);
      return { added, removed, released: passed, common };
    })
    .immediate();
  dropPassedSegments(db, result.common);
  return { added: result.added, removed: result.removed, released: result.released };
}
