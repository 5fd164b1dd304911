import { readFileSync, statSync } from 'node:fs';
import type { Logger } from 'pino';
import type { QuestDbClient } from '../questdb/questdb-http.js';
import { EMPTY_CATALOGUE, type Catalogue } from './catalogue.js';
import { CATALOGUE_TABLES, createCatalogueTables, encodeCatalogue, type CatalogueTables } from './catalogue-tables.js';

export interface CatalogueStoreOptions {
  /** `CATALOGUE_FILE`; undefined: no catalogue, ids show as they are. */
  path: string | undefined;
  pollMs: number;
  gateway: string;
  /** The site whose ships the catalogue names (`SITE_ID`). */
  site: string;
  questdb: QuestDbClient | undefined;
  logger: Logger;
  tables?: CatalogueTables;
}

/**
 * The catalogue as the dashboards read it. Grafana reads only QuestDB, so the gateway loads the
 * file, checks it and writes it to two small QuestDB tables: at start, whenever the file changes
 * (polled) and on SIGHUP. A file with a mistake is refused whole, with every problem logged, and
 * the catalogue loaded before stays; one that is missing is an empty catalogue. A write QuestDB
 * did not take is made again at the next housekeeping run. The file's parser (yaml and its schema)
 * is loaded when there is a file to parse: without one the store holds the empty catalogue alone.
 */
export class CatalogueStore {
  #catalogue: Catalogue = EMPTY_CATALOGUE;
  #fileVersion = '';
  /** A catalogue was loaded before (a reload, not the start). */
  #loaded = false;
  /** The catalogue changed since it was last written to QuestDB. */
  #unpublished = true;
  #tablesReady = false;
  #timer: NodeJS.Timeout | undefined;
  /** The latest read of the file, done; reads follow each other in the order asked. */
  #read: Promise<void>;
  readonly #options: CatalogueStoreOptions;
  readonly #tables: CatalogueTables;

  constructor(options: CatalogueStoreOptions) {
    this.#options = options;
    this.#tables = options.tables ?? CATALOGUE_TABLES;
    this.#read = this.#readFile();
  }

  get catalogue(): Catalogue {
    return this.#catalogue;
  }

  /** The latest read of the file asked for, done. Never rejects. */
  whenRead(): Promise<void> {
    return this.#read;
  }

  /** Re-reads the file; keeps the catalogue loaded before when it has a mistake. Never rejects. */
  reload(): Promise<void> {
    this.#read = this.#read.then(() => this.#readFile());
    return this.#read;
  }

  async #readFile(): Promise<void> {
    const { path, logger } = this.#options;
    this.#fileVersion = this.#version();
    if (path === undefined) return;
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') {
        logger.error({ event: 'catalogue_unreadable', path, code }, 'catalogue file cannot be read; keeping the catalogue loaded before');
        return;
      }
      text = '';
      logger.info({ event: 'catalogue_missing', path }, 'no catalogue file: ship and cargo ids show as they are');
    }
    const thinningBefore = JSON.stringify(this.#catalogue.thinning);
    try {
      this.#catalogue = text.trim() === '' ? EMPTY_CATALOGUE : (await import('./catalogue-file.js')).parseCatalogue(text);
    } catch (error) {
      const problems = (error as { problems?: string[] }).problems ?? [(error as Error).message];
      logger.error(
        { event: 'catalogue_invalid', path, problems },
        `catalogue file refused, the one loaded before stays: ${problems.join('; ')}`,
      );
      return;
    }
    this.#unpublished = true;
    if (this.#loaded && JSON.stringify(this.#catalogue.thinning) !== thinningBefore) {
      // The sinks decide from the rules they started with, so a replay after a crash decides the same.
      logger.warn({ event: 'thinning_changed', path }, "the catalogue's thinning rules changed: the sinks apply them from the next start");
    }
    this.#loaded = true;
    logger.info(
      { event: 'catalogue_loaded', path, ships: this.#catalogue.ships.size, cargo: this.#catalogue.cargo.length },
      'catalogue loaded',
    );
  }

  /** Starts watching the file for changes, each change written to QuestDB at once; without `CATALOGUE_FILE`, nothing. */
  watch(): void {
    if (this.#options.path === undefined) return;
    this.#timer ??= setInterval(() => {
      if (this.#version() === this.#fileVersion) return;
      void this.reload().then(() => this.publish());
    }, this.#options.pollMs).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Writes the catalogue to QuestDB, once the file read last is, unless it is there already; true once it is. */
  async publish(now = Date.now()): Promise<boolean> {
    await this.#read;
    const { questdb, gateway, site, logger } = this.#options;
    if (questdb === undefined) return false;
    if (!this.#unpublished) return true;
    this.#unpublished = false;
    try {
      if (!this.#tablesReady) {
        for (const statement of createCatalogueTables(this.#tables)) await questdb.exec(statement);
        this.#tablesReady = true;
      }
      const outcome = await questdb.write(encodeCatalogue(this.#catalogue, gateway, site, now, this.#tables));
      if (!outcome.ok) throw new Error(outcome.message);
      return true;
    } catch (error) {
      this.#unpublished = true;
      this.#tablesReady = false;
      logger.debug({ event: 'catalogue_publish_failed', error: (error as Error).message }, 'catalogue not written to QuestDB yet');
      return false;
    }
  }

  /** Identity and change time of the file: editors replace it by rename or write it in place. */
  #version(): string {
    if (this.#options.path === undefined) return 'none';
    try {
      const stat = statSync(this.#options.path, { bigint: true });
      return `${stat.ino}:${stat.size}:${stat.mtimeNs}`;
    } catch {
      return 'missing';
    }
  }
}
