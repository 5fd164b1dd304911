import { type QuestDbClient, QuestDbHttp, type QuestDbOptions } from '../questdb/questdb-http.js';

/** The spans a ship's page offers, each with the bucket one point of its charts averages. */
export const SPANS = {
  1: { bucket: '1m', bucketMs: 60_000 },
  6: { bucket: '5m', bucketMs: 5 * 60_000 },
  24: { bucket: '20m', bucketMs: 20 * 60_000 },
} as const;
export type SpanHours = keyof typeof SPANS;
export const DEFAULT_SPAN: SpanHours = 6;

/** A page waits this long for QuestDB at most: it shows the latest values without the history rather than hang. */
export const HISTORY_TIMEOUT_MS = 3000;
/** Rows one query returns at most: 24 h of 20-minute buckets for many more cargo ids than a ship sends. */
const MAX_ROWS = 10_000;

/** One bucket of one cargo id: the average, least and largest value in it, and how many readings. */
export interface HistoryPoint {
  ms: number;
  avg: number;
  min: number;
  max: number;
  count: number;
}

export type CargoHistory =
  /** The gateway writes to no local QuestDB: there is no history to show. */
  | { kind: 'off' }
  | { kind: 'unreachable'; url: string; message: string }
  | { kind: 'ok'; url: string; fromMs: number; toMs: number; bucketMs: number; byCargo: Map<string, HistoryPoint[]> };

/** Where the readings are: the local QuestDB, its readings table and this gateway's site in it. */
export interface ReadingsStore {
  questdb: QuestDbOptions;
  table: string;
  site: string;
}

/** A string literal of QuestDB's SQL: quotes doubled. */
const literal = (text: string): string => `'${text.replaceAll("'", "''")}'`;

/** The query for one ship's cargo over the span, in buckets, oldest first. Exported for its test. */
export function historyQuery(store: Pick<ReadingsStore, 'table' | 'site'>, shipId: string, fromMs: number, span: SpanHours): string {
  const from = new Date(fromMs).toISOString();
  return (
    `SELECT time, cargo_id, avg(value) avg, min(value) min, max(value) max, count() n FROM "${store.table.replaceAll('"', '""')}"` +
    ` WHERE ship_id = ${literal(shipId)} AND site = ${literal(store.site)} AND time >= ${literal(from)}` +
    ` SAMPLE BY ${SPANS[span].bucket} ALIGN TO CALENDAR ORDER BY time LIMIT ${MAX_ROWS}`
  );
}

interface ExecAnswer {
  columns: { name: string }[];
  dataset: unknown[][];
}

/**
 * A ship's cargo over the last hours, from the local QuestDB over its HTTP `/exec` API: the site's
 * own readings of that ship, averaged per bucket. A missing table is no readings yet; any other
 * failure says what QuestDB (or the way to it) answered.
 */
export class CargoHistorySource {
  readonly #store: ReadingsStore | undefined;
  #client: QuestDbClient | undefined;

  constructor(store: ReadingsStore | undefined, client?: QuestDbClient) {
    this.#store = store;
    this.#client = client;
  }

  async read(shipId: string, span: SpanHours, now: number): Promise<CargoHistory> {
    const store = this.#store;
    if (store === undefined) return { kind: 'off' };
    const url = store.questdb.url;
    const bucketMs = SPANS[span].bucketMs;
    const fromMs = Math.floor((now - span * 3_600_000) / bucketMs) * bucketMs;
    this.#client ??= new QuestDbHttp({ ...store.questdb, timeoutMs: HISTORY_TIMEOUT_MS });
    let answer: ExecAnswer;
    try {
      answer = await this.#client.exec<ExecAnswer>(historyQuery(store, shipId, fromMs, span));
    } catch (error) {
      const message = (error as Error).message;
      if (/table does not exist/i.test(message)) return { kind: 'ok', url, fromMs, toMs: now, bucketMs, byCargo: new Map() };
      return { kind: 'unreachable', url, message };
    }
    return { kind: 'ok', url, fromMs, toMs: now, bucketMs, byCargo: pointsByCargo(answer) };
  }

  async close(): Promise<void> {
    await this.#client?.close();
  }
}

function pointsByCargo(answer: ExecAnswer): Map<string, HistoryPoint[]> {
  const at = (name: string) => answer.columns.findIndex((c) => c.name === name);
  const [time, cargo, avg, min, max, n] = ['time', 'cargo_id', 'avg', 'min', 'max', 'n'].map(at) as number[];
  const byCargo = new Map<string, HistoryPoint[]>();
  for (const row of answer.dataset) {
    const ms = Date.parse(String(row[time!]));
    const values = [row[avg!], row[min!], row[max!]];
    if (Number.isNaN(ms) || !values.every((v) => typeof v === 'number' && Number.isFinite(v))) continue;
    const id = String(row[cargo!]);
    const points = byCargo.get(id) ?? [];
    points.push({ ms, avg: values[0] as number, min: values[1] as number, max: values[2] as number, count: Number(row[n!]) });
    byCargo.set(id, points);
  }
  return byCargo;
}
