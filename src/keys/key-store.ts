import { type FSWatcher, watch } from 'node:fs';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import { KeyCounterTable } from './key-counters.js';
import { DEFAULT_KEY_NAME, readKeyFile, type KeyEntry, type ParsedKeyFile } from './key-file.js';
import { keyDigest, keyMatches } from './key-hash.js';
import { keyFileVersion, writeKeysApplied } from './keys-applied.js';

/** Who a request authenticated as. */
export interface Principal {
  name: string;
  shipPrefix?: string;
  /** The only site the key may write as. */
  site?: string;
}

/**
 * A connection's standing with the keys: who it authenticated as, and at which generation of the
 * key store. A connection that outlives a change of the keys renews it (`KeyStore.renew`).
 */
export interface KeyGrant {
  readonly principal: Principal;
  readonly generation: number;
}

export interface KeyStoreOptions {
  /** `API_KEY`, known as the key named `default`, allowed every ship. */
  defaultKey: string;
  path: string;
  /** How often the file is checked besides its notifications: a file made where there was none, a file system without them. */
  pollMs: number;
  logger: Logger;
  /** Where to say which version of the file is applied (`DATA_DIR/keys-applied.json`), for `keys add|revoke`. */
  appliedFile?: string;
}

/** Events about the file come in bursts (an editor's write, a rename): one look after the last. */
const SETTLE_MS = 20;
/** What stands for API_KEY among the entries' hashes: it never changes while the gateway runs. */
const DEFAULT_IDENTITY = '\0API_KEY';

/**
 * The keys devices may use: `API_KEY` plus the entries of the key file, which is re-read when it
 * changes (watched, polled as well) or on `reload()` (SIGHUP, the console), without a
 * restart. Each load that changes anything raises `generation` and tells the listeners, so that
 * connections that authenticated earlier (MQTT sessions) are judged again.
 */
export class KeyStore {
  readonly counters = new KeyCounterTable();
  readonly #defaultDigest: string;
  #entries: KeyEntry[] = [];
  /** Digests of presented keys that matched, so a device's key costs one HMAC per reload, not per request. */
  #matched = new Map<string, KeyEntry>();
  /** The entry each grant was made from (its hash): a renewed grant must come from the same key. */
  readonly #grants = new WeakMap<KeyGrant, string>();
  readonly #listeners = new Set<() => void>();
  #generation = 0;
  #fileVersion = '';
  #timer: NodeJS.Timeout | undefined;
  #watcher: FSWatcher | undefined;
  /** The file (inode) the watcher watches. */
  #watchedIno = '';
  #settle: NodeJS.Timeout | undefined;

  constructor(private readonly options: KeyStoreOptions) {
    this.#defaultDigest = keyDigest(options.defaultKey);
    this.reload();
  }

  get path(): string {
    return this.options.path;
  }

  /** Raised by every load of the key file: a grant of an older generation must be renewed before it is used. */
  get generation(): number {
    return this.#generation;
  }

  /** The principal of a presented key, or undefined when no key matches. */
  authenticate(given: string): Principal | undefined {
    return this.#match(given)?.principal;
  }

  /** The grant of a presented key for a connection that stays open, or undefined when no key matches. */
  grant(given: string): KeyGrant | undefined {
    const match = this.#match(given);
    if (match === undefined) return undefined;
    return this.#grantOf(match.principal, match.identity);
  }

  /**
   * The grant as the keys stand now: the same one while nothing changed, a new one when the key is
   * still in the file (its ship prefix or site may have changed), undefined when it was revoked or
   * replaced by another key of the same name.
   */
  renew(grant: KeyGrant): KeyGrant | undefined {
    if (grant.generation === this.#generation) return grant;
    const identity = this.#grants.get(grant);
    if (identity === undefined) return undefined;
    if (identity === DEFAULT_IDENTITY) return this.#grantOf(grant.principal, identity);
    const entry = this.#entries.find((e) => e.hash === identity);
    return entry === undefined ? undefined : this.#grantOf(principal(entry), identity);
  }

  /** Called after each load of the key file; returns the function that stops it. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Re-reads the key file; keeps the previous keys when it cannot be read at all. */
  reload(): void {
    const { path, logger } = this.options;
    const version = keyFileVersion(path);
    let parsed: ParsedKeyFile;
    try {
      parsed = readKeyFile(path);
    } catch (error) {
      logger.error(
        { event: 'keys_unreadable', path, code: (error as NodeJS.ErrnoException).code },
        'key file cannot be read; keeping the keys loaded before',
      );
      return;
    }
    for (const problem of parsed.problems) logger.warn({ event: 'keys_line_skipped', path, problem }, 'key file line skipped');
    this.#entries = parsed.entries;
    this.#matched = new Map();
    this.#fileVersion = version.version;
    this.#generation += 1;
    this.counters.sync([{ name: DEFAULT_KEY_NAME }, ...parsed.entries]);
    logger.info({ event: 'keys_loaded', path, keys: parsed.entries.length + 1, generation: this.#generation }, 'keys loaded');
    for (const listener of this.#listeners) listener();
    this.#sayApplied(version);
  }

  /**
   * Starts watching the key file for changes: the file itself through the kernel's notifications
   * (a change is applied within milliseconds), and a poll every `pollMs`, which also sees a file
   * appear where there was none and keeps watching where notifications are not to be had. The
   * file, not its folder: the folder is usually the data directory, whose queue changes at every
   * commit.
   */
  watch(): void {
    this.#timer ??= setInterval(() => this.#look(), this.options.pollMs).unref();
    this.#look();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    clearTimeout(this.#settle);
    this.#unwatch();
  }

  /**
   * Watches the file the name stands for now (a rename puts another file there), then compares:
   * a change made before the watch began is seen here, one after it is notified.
   */
  #look(): void {
    if (this.#timer === undefined) return;
    const { ino } = keyFileVersion(this.options.path);
    if (ino !== this.#watchedIno || this.#watcher === undefined) {
      this.#unwatch();
      this.#watchFile(ino);
    }
    this.#checkFile();
  }

  #watchFile(ino: string): void {
    if (ino === '') return;
    try {
      this.#watcher = watch(this.options.path, { persistent: false }, () => {
        clearTimeout(this.#settle);
        this.#settle = setTimeout(() => this.#look(), SETTLE_MS).unref();
      });
      this.#watcher.on('error', () => this.#unwatch());
      this.#watchedIno = ino;
    } catch {
      // Gone meanwhile, or no notifications here: the poll looks again.
    }
  }

  #unwatch(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
    this.#watchedIno = '';
  }

  #checkFile(): void {
    if (keyFileVersion(this.options.path).version !== this.#fileVersion) this.reload();
  }

  #match(given: string): { principal: Principal; identity: string } | undefined {
    const digest = keyDigest(given);
    if (digest === this.#defaultDigest) return { principal: DEFAULT_PRINCIPAL, identity: DEFAULT_IDENTITY };
    let entry = this.#matched.get(digest);
    if (entry === undefined) {
      entry = this.#entries.find((e) => keyMatches(e.hash, given));
      if (entry === undefined) return undefined;
      // Bounded by the number of keys: only keys that matched an entry are remembered.
      this.#matched.set(digest, entry);
    }
    return { principal: principal(entry), identity: entry.hash };
  }

  #grantOf(principal: Principal, identity: string): KeyGrant {
    const grant: KeyGrant = { principal, generation: this.#generation };
    this.#grants.set(grant, identity);
    return grant;
  }

  #sayApplied(version: { version: string; mtimeNs: string }): void {
    const file = this.options.appliedFile;
    if (file === undefined) return;
    try {
      writeKeysApplied(file, { path: resolve(this.options.path), ...version, pid: process.pid });
    } catch (error) {
      this.options.logger.warn(
        { event: 'keys_applied_not_written', file, code: (error as NodeJS.ErrnoException).code },
        'could not say which key file is applied; `keys add|revoke` will not wait for this gateway',
      );
    }
  }
}

const DEFAULT_PRINCIPAL: Principal = { name: DEFAULT_KEY_NAME };

const principal = (entry: KeyEntry): Principal => ({
  name: entry.name,
  ...(entry.shipPrefix === undefined ? {} : { shipPrefix: entry.shipPrefix }),
  ...(entry.site === undefined ? {} : { site: entry.site }),
});
