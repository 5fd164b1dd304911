import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { KeyCounterTable } from './key-counters.js';
import { DEFAULT_KEY_NAME, readKeyFile, type KeyEntry, type ParsedKeyFile } from './key-file.js';
import { keyDigest, keyMatches } from './key-hash.js';

/** Who a request authenticated as. */
export interface Principal {
  name: string;
  shipPrefix?: string;
  /** The only site the key may write as. */
  site?: string;
}

export interface KeyStoreOptions {
  /** `API_KEY`, known as the key named `default`, allowed every ship. */
  defaultKey: string;
  path: string;
  pollMs: number;
  logger: Logger;
}

/**
 * The keys devices may use: `API_KEY` plus the entries of the key file, which is re-read when it
 * changes (polled) or on `reload()` (SIGHUP), without a restart. Requests in flight keep the key
 * they authenticated with.
 */
export class KeyStore {
  readonly counters = new KeyCounterTable();
  readonly #defaultDigest: string;
  #entries: KeyEntry[] = [];
  /** Digests of presented keys that matched, so a device's key costs one HMAC per reload, not per request. */
  #matched = new Map<string, KeyEntry>();
  #fileVersion = '';
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: KeyStoreOptions) {
    this.#defaultDigest = keyDigest(options.defaultKey);
    this.reload();
  }

  get path(): string {
    return this.options.path;
  }

  /** The principal of a presented key, or undefined when no key matches. */
  authenticate(given: string): Principal | undefined {
    const digest = keyDigest(given);
    if (digest === this.#defaultDigest) return { name: DEFAULT_KEY_NAME };
    const cached = this.#matched.get(digest);
    if (cached !== undefined) return principal(cached);
    const entry = this.#entries.find((e) => keyMatches(e.hash, given));
    if (entry === undefined) return undefined;
    // Bounded by the number of keys: only keys that matched an entry are remembered.
    this.#matched.set(digest, entry);
    return principal(entry);
  }

  /** Re-reads the key file; keeps the previous keys when it cannot be read at all. */
  reload(): void {
    let parsed: ParsedKeyFile;
    try {
      parsed = readKeyFile(this.options.path);
    } catch (error) {
      this.options.logger.error(
        { event: 'keys_unreadable', path: this.options.path, code: (error as NodeJS.ErrnoException).code },
        'key file cannot be read; keeping the keys loaded before',
      );
      return;
    }
    for (const problem of parsed.problems)
      this.options.logger.warn({ event: 'keys_line_skipped', path: this.options.path, problem }, 'key file line skipped');
    this.#entries = parsed.entries;
    this.#matched = new Map();
    this.#fileVersion = this.#version();
    this.counters.sync([{ name: DEFAULT_KEY_NAME }, ...parsed.entries]);
    this.options.logger.info({ event: 'keys_loaded', path: this.options.path, keys: parsed.entries.length + 1 }, 'keys loaded');
  }

  /** Starts watching the key file for changes. */
  watch(): void {
    this.#timer ??= setInterval(() => {
      if (this.#version() !== this.#fileVersion) this.reload();
    }, this.options.pollMs).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Identity and change time of the file: `keys add` replaces it by rename, editors write in place. */
  #version(): string {
    try {
      const stat = statSync(this.options.path, { bigint: true });
      return `${stat.ino}:${stat.size}:${stat.mtimeNs}`;
    } catch {
      return 'missing';
    }
  }
}

const principal = (entry: KeyEntry): Principal => ({
  name: entry.name,
  ...(entry.shipPrefix === undefined ? {} : { shipPrefix: entry.shipPrefix }),
  ...(entry.site === undefined ? {} : { site: entry.site }),
});
