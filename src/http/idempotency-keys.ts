import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { replaceFileDurably } from '../durable-file.js';

/**
 * `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header): a client that sends one gets the
 * answer of the first request with that key for every repetition within the window, and its
 * readings are stored once, however often it retried after losing an answer. Keys are per device
 * key (two devices may pick the same key), and a key reused for a different request is refused:
 * other readings, another endpoint, or another site (a relaying gateway's `X-Harbor-Site`).
 *
 * Held in memory: at most `maxKeys` (the oldest is forgotten first, and counted when that happens
 * before its window passed), kept for `windowMs` on the monotonic clock. A graceful stop writes the
 * answered ones to a file in the data directory and the next start reads them back, so a retry
 * across a restart or an update is still recognised; a crash or power cut loses them (see
 * docs/guarantees.md).
 */

/** The answer a repetition gets: the first request's status and JSON body. */
export interface StoredAnswer {
  status: number;
  body: unknown;
}

/**
 * `site`: the site the request's readings were stored under, null for the gateway's own (whatever
 * it is named: a retry across a rename is the same request); undefined for a key an earlier
 * release saved without one, which any site's repetition matches.
 */
type Entry =
  | { state: 'pending'; fingerprint: string; site: string | null; at: number; settled: Promise<void>; settle: () => void }
  | { state: 'answered'; fingerprint: string; site: string | null | undefined; at: number; answer: StoredAnswer };

/** What to do with a request that carries a key. */
export type Claim =
  /** Go on; call `answered` with what the client gets, or `failed` when nothing was stored. */
  | { kind: 'first'; answered: (answer: StoredAnswer) => void; failed: () => void }
  /** Answer this, which the first request with the key got. */
  | { kind: 'repeat'; answer: StoredAnswer }
  /** The key belongs to a different request. */
  | { kind: 'mismatch' };

/** The file a graceful stop leaves for the next start. */
export const idempotencyFile = (dataDir: string): string => join(dataDir, 'idempotency-keys.json');

/** A key is 1 to 255 visible ASCII characters; a structured-field string's quotes are taken off. */
export function parseIdempotencyKey(header: string): string | undefined {
  const key = header.length >= 2 && header.startsWith('"') && header.endsWith('"') ? header.slice(1, -1) : header;
  return /^[\x20-\x7e]{1,255}$/.test(key) && key.trim() !== '' ? key : undefined;
}

export class IdempotencyKeys {
  readonly windowMs: number;
  readonly maxKeys: number;
  readonly #now: () => number;
  /** In the order the keys were first seen, so the oldest is first. */
  readonly #entries = new Map<string, Entry>();
  /** Keys forgotten before their window passed, because `maxKeys` newer ones came. */
  forgottenEarly = 0;
  /** Requests answered from a key instead of being stored again. */
  repeats = 0;

  constructor(options: { windowMs: number; maxKeys: number; now?: () => number }) {
    this.windowMs = options.windowMs;
    this.maxKeys = options.maxKeys;
    this.#now = options.now ?? (() => performance.now());
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The request of `scope` (the device key's name) with `key`, `fingerprint` (what it asks to
   * store) and `site` (where: null for the gateway's own). A repetition while the first is still
   * being stored waits for it: stored, it gets its answer; not stored (refused, or its client gone
   * before the commit), it goes on as the first.
   */
  async claim(scope: string, key: string, fingerprint: string, site: string | null = null): Promise<Claim> {
    const id = `${scope}\n${key}`;
    for (;;) {
      this.#expire();
      const entry = this.#entries.get(id);
      if (entry === undefined) break;
      if (entry.fingerprint !== fingerprint || (entry.site !== undefined && entry.site !== site)) return { kind: 'mismatch' };
      if (entry.state === 'answered') {
        this.repeats += 1;
        return { kind: 'repeat', answer: entry.answer };
      }
      await entry.settled;
    }
    let settle = (): void => undefined;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const pending: Entry = { state: 'pending', fingerprint, site, at: this.#now(), settled, settle };
    this.#add(id, pending);
    return {
      kind: 'first',
      answered: (answer) => {
        if (this.#entries.get(id) === pending) this.#entries.set(id, { state: 'answered', fingerprint, site, at: pending.at, answer });
        settle();
      },
      failed: () => {
        if (this.#entries.get(id) === pending) this.#entries.delete(id);
        settle();
      },
    };
  }

  /** Writes the answered keys still in their window for the next start (temporary file, fsync, rename). */
  save(path: string, wallNow = Date.now()): number {
    this.#expire();
    const now = this.#now();
    const saved: SavedKey[] = [];
    for (const [id, entry] of this.#entries) {
      if (entry.state !== 'answered') continue;
      const key: SavedKey = { id, fingerprint: entry.fingerprint, ageMs: now - entry.at, answer: entry.answer };
      if (entry.site !== undefined) key.site = entry.site;
      saved.push(key);
    }
    replaceFileDurably(path, JSON.stringify({ savedAt: wallNow, keys: saved }), 0o640);
    return saved.length;
  }

  /**
   * Reads what the last graceful stop saved and removes the file; the time the gateway was stopped
   * counts against each key's window (by the wall clock, never less than nothing). Returns how many.
   */
  load(path: string, wallNow = Date.now()): number {
    let saved: { savedAt: number; keys: SavedKey[] };
    try {
      saved = JSON.parse(readFileSync(path, 'utf8'));
    } catch {
      rmSync(path, { force: true });
      return 0;
    }
    rmSync(path, { force: true });
    const stoppedMs = Math.max(0, wallNow - saved.savedAt);
    const now = this.#now();
    let loaded = 0;
    for (const key of saved.keys ?? []) {
      const ageMs = key.ageMs + stoppedMs;
      if (ageMs >= this.windowMs) continue;
      // A key saved by an earlier release has no site: it matches the repetition of any.
      const site = typeof key.site === 'string' || key.site === null ? key.site : undefined;
      this.#add(key.id, { state: 'answered', fingerprint: key.fingerprint, site, at: now - ageMs, answer: key.answer });
      loaded += 1;
    }
    return loaded;
  }

  #add(id: string, entry: Entry): void {
    this.#entries.delete(id);
    while (this.#entries.size >= this.maxKeys) {
      const [oldest] = this.#entries.keys();
      this.#entries.delete(oldest!);
      this.forgottenEarly += 1;
    }
    this.#entries.set(id, entry);
  }

  /** Forgets the keys whose window passed: the oldest are first in the map. */
  #expire(): void {
    const limit = this.#now() - this.windowMs;
    for (const [id, entry] of this.#entries) {
      if (entry.at > limit) return;
      this.#entries.delete(id);
      if (entry.state === 'pending') entry.settle();
    }
  }
}

interface SavedKey {
  id: string;
  fingerprint: string;
  /** Absent in the files of releases that did not keep it. */
  site?: string | null;
  ageMs: number;
  answer: StoredAnswer;
}
