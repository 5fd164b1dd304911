import Database from 'better-sqlite3';
import { listSegments, ownSiteNames, readProgress, type Progress, type SegmentRow } from './queue-file.js';
import { assertReadableFormat } from './queue-format.js';
import { type QueueRecord, queueRecord } from './queue-reader.js';
import { compareMarks } from './sink-marks.js';

/**
 * A queue file opened to be read and never written: no format step, no pragma that writes, no lock
 * on the data directory. For files no gateway runs on (one set aside after a failed update, a copy
 * from before it), which a release reads to hand their readings to another release.
 */
export class ReadOnlyQueue {
  readonly #db: Database.Database;
  /** The names this gateway answered its own readings under, by id; none in a file without `own_sites`. */
  readonly #ownSites: ReadonlyMap<number, string>;

  constructor(readonly path: string) {
    // A file of a newer release is refused, as the gateway refuses it.
    assertReadableFormat(path);
    this.#db = new Database(path, { readonly: true, fileMustExist: true });
    const hasOwnSites = this.#db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'own_sites'").get() !== undefined;
    this.#ownSites = hasOwnSites ? ownSiteNames(this.#db) : new Map();
  }

  /** Where every sink has delivered up to: what lies after it is still queued for some sink. */
  commonMark(): Progress {
    return readProgress(this.#db);
  }

  /** The file's last record, or its common mark when it holds none after it. */
  lastRecord(): Progress {
    for (const segment of listSegments(this.#db).reverse()) {
      const id = this.#db.prepare<[], number | null>(`SELECT MAX(id) FROM segment_${segment}`).pluck().get();
      if (id !== null && id !== undefined) return { segment, lastId: id };
    }
    return this.commonMark();
  }

  /** Dead letters with an id above `afterId`. */
  deadLettersAfter(afterId: number): number {
    return this.#db.prepare<[number], number>('SELECT COUNT(*) FROM dead_letters WHERE id > ?').pluck().get(afterId) ?? 0;
  }

  lastDeadLetterId(): number {
    return this.#db.prepare<[], number | null>('SELECT MAX(id) FROM dead_letters').pluck().get() ?? 0;
  }

  /** The records after `mark`, oldest first, `batch` at a time. */
  *recordsAfter(mark: Progress, batch = 500): Generator<QueueRecord[]> {
    for (const segment of listSegments(this.#db)) {
      if (segment < mark.segment) continue;
      const read = this.#recordsStatement(segment);
      let after = segment === mark.segment ? mark.lastId : 0;
      for (;;) {
        const rows: QueueRecord[] = [];
        for (const row of read.iterate(after)) {
          rows.push(queueRecord(segment, row, this.#ownSites));
          if (rows.length === batch) break;
        }
        if (rows.length === 0) break;
        yield rows;
        after = rows.at(-1)!.id;
      }
    }
  }

  /**
   * Files of formats before 5 have no site and sink columns, files of builds before names were kept
   * no own_site: their records are this gateway's, for every sink, under its site as named now.
   */
  #recordsStatement(segment: number): Database.Statement<[number], SegmentRow> {
    const columns = new Set(this.#db.prepare<[], string>(`SELECT name FROM pragma_table_info('segment_${segment}')`).pluck().all());
    const optional = (name: string) => (columns.has(name) ? name : 'NULL');
    return this.#db
      .prepare<[number], SegmentRow>(
        `SELECT id, received_ms, readings, bytes, payload, ${optional('site')}, ${optional('sink')}, ${optional('own_site')} FROM segment_${segment} WHERE id > ? ORDER BY id`,
      )
      .raw(true);
  }

  close(): void {
    this.#db.close();
  }
}

/** The later of two marks. */
export const laterMark = (a: Progress, b: Progress): Progress => (compareMarks(a, b) >= 0 ? a : b);
