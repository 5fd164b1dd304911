import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

/**
 * Which gateway owns each site name at a centre. Site gateways send their instance (an id each
 * makes at its first start, made anew on another board) with what they forward; two instances
 * that forward under one site id are two gateways, and their readings would overwrite each other's
 * on the same keys. The rule: **the first instance to claim a site owns it**; another instance's
 * readings for that site are refused (409 `site_claimed`, which its upstream sink holds, not
 * dead-letters) until it is renamed, or the claim is released: by the operator (the CLI, the
 * console), or by the owner's silence of `expiryMs`, after which the next claimant takes the site.
 * Nothing is ever overwritten, and every reading waits somewhere: stored, or queued at its site.
 *
 * Kept in `DATA_DIR/site-claims.db`, made when the first claim comes. When an owner was last heard
 * is noted in memory and written at most every few minutes: a claim's expiry is counted in days.
 */
export interface SiteClaim {
  site: string;
  instance: string;
  /** The owner's gateway name, as its site reports tell it. */
  gateway: string | null;
  firstMs: number;
  lastMs: number;
}

/** An instance refused a site another owns, and how often since it was first refused. */
export interface ClaimConflict {
  site: string;
  instance: string;
  gateway: string | null;
  firstMs: number;
  lastMs: number;
  refusedRequests: number;
}

export type ClaimCheck = { ok: true } | { ok: false; owner: SiteClaim };

/** How this centre's claims stand now: for `/status`, the console and the health rows. */
export interface ClaimsView {
  sites: number;
  /** Conflicts whose claimant was refused within the last `ACTIVE_MS`, each with the owner it met. */
  conflicts: (ClaimConflict & { owner: SiteClaim | undefined })[];
}

export const claimsFile = (dataDir: string): string => join(dataDir, 'site-claims.db');

/** A conflict whose claimant was refused this recently is current; older ones stay listed by the CLI. */
export const ACTIVE_MS = 10 * 60_000;
/** Claimants kept per site. */
const MAX_CLAIMANTS = 16;
/** When an owner was last heard is written no more often than this. */
const PERSIST_SEEN_MS = 10 * 60_000;

interface Held extends SiteClaim {
  /** Heard since the last flush. */
  seen: boolean;
  /** `lastMs` as last written. */
  writtenMs: number;
}

interface Refused extends ClaimConflict {
  dirty: boolean;
}

/** What the claims tell as they change; the gateway logs it. */
export type ClaimEvent =
  | { kind: 'claimed'; claim: SiteClaim; took?: SiteClaim }
  | { kind: 'refused'; conflict: ClaimConflict; owner: SiteClaim }
  | { kind: 'released'; claim: SiteClaim };

export class SiteClaims {
  readonly #path: string;
  readonly #expiryMs: number;
  readonly #now: () => number;
  readonly #onEvent: (event: ClaimEvent) => void;
  /** This gateway's own site and instance: its own site is its own, taken when the file opens. */
  readonly #own: { site: string; instance: string; gateway: string } | undefined;
  #db: Database.Database | undefined;
  readonly #claims = new Map<string, Held>();
  /** By site, then instance. */
  readonly #conflicts = new Map<string, Map<string, Refused>>();

  constructor(options: {
    dataDir: string;
    expiryMs: number;
    own?: { site: string; instance: string; gateway: string };
    now?: () => number;
    onEvent?: (event: ClaimEvent) => void;
  }) {
    this.#path = claimsFile(options.dataDir);
    this.#expiryMs = options.expiryMs;
    this.#own = options.own;
    this.#now = options.now ?? Date.now;
    this.#onEvent = options.onEvent ?? (() => undefined);
    if (existsSync(this.#path)) this.refresh();
  }

  /**
   * Whether `instance` may forward readings of `site`: it owns the site, or claims it now (nobody
   * does, or the owner was silent past the expiry). `gateway`: its name, when known (a report).
   * The owner's way costs a map lookup; a refusal reads the file, which a release from the
   * command line changed.
   */
  check(site: string, instance: string, gateway?: string): ClaimCheck {
    const held = this.#claims.get(site);
    if (held !== undefined && held.instance === instance) {
      held.seen = true;
      if (gateway !== undefined && held.gateway !== gateway) this.#nameOwner(held, gateway);
      return { ok: true };
    }
    return this.#decide(site, instance, gateway);
  }

  /** Lets go of a site's claim: the next instance that forwards under it owns it. Undefined when none was held. */
  release(site: string): SiteClaim | undefined {
    if (!existsSync(this.#path)) return undefined;
    const db = this.#open();
    const claim = this.#read(site);
    if (claim === undefined) return undefined;
    db.prepare('DELETE FROM site_claims WHERE site = ?').run(site);
    this.#claims.delete(site);
    this.#onEvent({ kind: 'released', claim });
    return claim;
  }

  /** Every claim and conflict as the file has them (the command line's view), after writing what memory holds. */
  list(): { claims: SiteClaim[]; conflicts: ClaimConflict[] } {
    if (!existsSync(this.#path)) return { claims: [], conflicts: [] };
    this.flush();
    const db = this.#open();
    return {
      claims: db.prepare<[], SiteClaim>(`SELECT ${CLAIM_COLUMNS} FROM site_claims ORDER BY site`).all(),
      conflicts: db.prepare<[], ClaimConflict>(`SELECT ${CONFLICT_COLUMNS} FROM site_claim_conflicts ORDER BY site, first_ms`).all(),
    };
  }

  /** The claims held and the conflicts of the last ACTIVE_MS. */
  view(): ClaimsView {
    const since = this.#now() - ACTIVE_MS;
    const conflicts: ClaimsView['conflicts'] = [];
    for (const [site, bySite] of this.#conflicts) {
      for (const conflict of bySite.values()) {
        if (conflict.lastMs < since) continue;
        const { dirty: _dirty, ...shown } = conflict;
        const owner = this.#claims.get(site);
        conflicts.push({ ...shown, owner: owner === undefined ? undefined : claimOf(owner) });
      }
    }
    return { sites: this.#claims.size, conflicts };
  }

  /**
   * Writes when owners were last heard (at most every few minutes each) and the conflicts' counts,
   * then reads the file again: a release from the command line takes effect here. For the
   * housekeeping run.
   */
  flush(): void {
    if (this.#db === undefined) return;
    const db = this.#db;
    const now = this.#now();
    db.transaction(() => {
      const seen = db.prepare('UPDATE site_claims SET last_ms = ? WHERE site = ? AND instance = ?');
      for (const held of this.#claims.values()) {
        if (!held.seen) continue;
        held.seen = false;
        held.lastMs = now;
        if (now - held.writtenMs < PERSIST_SEEN_MS) continue;
        seen.run(now, held.site, held.instance);
        held.writtenMs = now;
      }
      const conflict = db.prepare(
        `INSERT INTO site_claim_conflicts (site, instance, gateway, first_ms, last_ms, refused_requests) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (site, instance) DO UPDATE SET gateway = excluded.gateway, last_ms = excluded.last_ms, refused_requests = excluded.refused_requests`,
      );
      for (const bySite of this.#conflicts.values()) {
        for (const c of bySite.values()) {
          if (!c.dirty) continue;
          conflict.run(c.site, c.instance, c.gateway, c.firstMs, c.lastMs, c.refusedRequests);
          c.dirty = false;
        }
      }
      // Conflicts nobody repeated for the expiry are history.
      db.prepare('DELETE FROM site_claim_conflicts WHERE last_ms < ?').run(now - Math.max(this.#expiryMs, ACTIVE_MS));
    }).immediate();
    this.refresh();
  }

  /** Reads the claims and conflicts from the file again (the file is the truth; memory only adds when owners were heard). */
  refresh(): void {
    const db = this.#open();
    const stored = new Map(
      db
        .prepare<[], SiteClaim>(`SELECT ${CLAIM_COLUMNS} FROM site_claims`)
        .all()
        .map((c) => [c.site, c]),
    );
    for (const site of this.#claims.keys()) if (!stored.has(site)) this.#claims.delete(site);
    for (const [site, claim] of stored) {
      const held = this.#claims.get(site);
      if (held !== undefined && held.instance === claim.instance) continue;
      this.#claims.set(site, { ...claim, seen: false, writtenMs: claim.lastMs });
    }
    for (const c of db.prepare<[], ClaimConflict>(`SELECT ${CONFLICT_COLUMNS} FROM site_claim_conflicts`).all()) {
      const bySite = this.#conflicts.get(c.site) ?? new Map<string, Refused>();
      this.#conflicts.set(c.site, bySite);
      if (!bySite.has(c.instance)) bySite.set(c.instance, { ...c, dirty: false });
    }
  }

  close(): void {
    if (this.#db === undefined) return;
    this.flush();
    this.#db.close();
    this.#db = undefined;
  }

  #decide(site: string, instance: string, gateway: string | undefined): ClaimCheck {
    const db = this.#open();
    const now = this.#now();
    const owner = this.#read(site);
    const lapsed = owner !== undefined && this.#expiryMs > 0 && now - this.#lastHeard(owner, now) > this.#expiryMs;
    if (owner === undefined || lapsed) {
      this.#write(db, { site, instance, gateway: gateway ?? null, firstMs: now, lastMs: now });
      this.#conflicts.get(site)?.delete(instance);
      db.prepare('DELETE FROM site_claim_conflicts WHERE site = ? AND instance = ?').run(site, instance);
      this.#onEvent({ kind: 'claimed', claim: this.#claims.get(site)!, ...(owner === undefined ? {} : { took: owner }) });
      return { ok: true };
    }
    if (owner.instance === instance) {
      this.#claims.set(site, { ...owner, seen: true, writtenMs: owner.lastMs });
      return { ok: true };
    }
    const bySite = this.#conflicts.get(site) ?? new Map<string, Refused>();
    this.#conflicts.set(site, bySite);
    let conflict = bySite.get(instance);
    const first = conflict === undefined || now - conflict.lastMs > ACTIVE_MS;
    if (conflict === undefined) {
      // A key may name any instance: a site keeps its latest few claimants, not one per id ever sent.
      if (bySite.size >= MAX_CLAIMANTS) this.#forgetOldest(bySite);
      conflict = { site, instance, gateway: gateway ?? null, firstMs: now, lastMs: now, refusedRequests: 0, dirty: true };
      bySite.set(instance, conflict);
    }
    conflict.refusedRequests += 1;
    conflict.lastMs = now;
    conflict.dirty = true;
    if (gateway !== undefined) conflict.gateway = gateway;
    const current = this.#claims.get(site) ?? { ...owner, seen: false, writtenMs: owner.lastMs };
    this.#claims.set(site, current);
    const { dirty: _dirty, ...shown } = conflict;
    // Once when a conflict starts (or starts again after a quiet spell), not on every refusal.
    if (first) this.#onEvent({ kind: 'refused', conflict: shown, owner: claimOf(current) });
    return { ok: false, owner: claimOf(current) };
  }

  /** When the owner was last heard: memory knows better than the file between flushes. */
  #lastHeard(owner: SiteClaim, now: number): number {
    const held = this.#claims.get(owner.site);
    if (held === undefined || held.instance !== owner.instance) return owner.lastMs;
    return held.seen ? now : Math.max(held.lastMs, owner.lastMs);
  }

  #forgetOldest(bySite: Map<string, Refused>): void {
    let oldest: Refused | undefined;
    for (const c of bySite.values()) if (oldest === undefined || c.lastMs < oldest.lastMs) oldest = c;
    if (oldest === undefined) return;
    bySite.delete(oldest.instance);
    this.#open().prepare('DELETE FROM site_claim_conflicts WHERE site = ? AND instance = ?').run(oldest.site, oldest.instance);
  }

  #nameOwner(held: Held, gateway: string): void {
    held.gateway = gateway;
    this.#open().prepare('UPDATE site_claims SET gateway = ? WHERE site = ? AND instance = ?').run(gateway, held.site, held.instance);
  }

  #read(site: string): SiteClaim | undefined {
    return this.#open().prepare<[string], SiteClaim>(`SELECT ${CLAIM_COLUMNS} FROM site_claims WHERE site = ?`).get(site);
  }

  #write(db: Database.Database, claim: SiteClaim): void {
    db.prepare(
      `INSERT INTO site_claims (site, instance, gateway, first_ms, last_ms) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (site) DO UPDATE SET instance = excluded.instance, gateway = excluded.gateway, first_ms = excluded.first_ms, last_ms = excluded.last_ms`,
    ).run(claim.site, claim.instance, claim.gateway, claim.firstMs, claim.lastMs);
    this.#claims.set(claim.site, { ...claim, seen: false, writtenMs: claim.lastMs });
  }

  /**
   * This gateway's own site is its own: its devices write under it whatever others claim. Taken from
   * whoever had it when the file opens, so another gateway forwarding under it is refused.
   */
  #takeOwn(db: Database.Database): void {
    const own = this.#own;
    if (own === undefined) return;
    const before = this.#read(own.site);
    if (before?.instance === own.instance) return;
    const now = this.#now();
    this.#write(db, { site: own.site, instance: own.instance, gateway: own.gateway, firstMs: now, lastMs: now });
    this.#onEvent({ kind: 'claimed', claim: claimOf(this.#claims.get(own.site)!), ...(before === undefined ? {} : { took: before }) });
  }

  /** The file, made when first needed: a site gateway that is nobody's centre never has one. */
  #open(): Database.Database {
    if (this.#db !== undefined) return this.#db;
    const db = new Database(this.#path);
    db.pragma('journal_mode = WAL');
    // A claim is rare and decides whose readings are stored: synced with its commit.
    db.pragma('synchronous = FULL');
    db.pragma('busy_timeout = 5000');
    db.exec(`
CREATE TABLE IF NOT EXISTS site_claims (
  site     TEXT    PRIMARY KEY,
  instance TEXT    NOT NULL,
  gateway  TEXT,
  first_ms INTEGER NOT NULL,
  last_ms  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS site_claim_conflicts (
  site             TEXT    NOT NULL,
  instance         TEXT    NOT NULL,
  gateway          TEXT,
  first_ms         INTEGER NOT NULL,
  last_ms          INTEGER NOT NULL,
  refused_requests INTEGER NOT NULL,
  PRIMARY KEY (site, instance)
) WITHOUT ROWID;
`);
    this.#db = db;
    this.#takeOwn(db);
    return db;
  }
}

const CLAIM_COLUMNS = 'site, instance, gateway, first_ms AS firstMs, last_ms AS lastMs';
const CONFLICT_COLUMNS = 'site, instance, gateway, first_ms AS firstMs, last_ms AS lastMs, refused_requests AS refusedRequests';

const claimOf = ({ site, instance, gateway, firstMs, lastMs }: SiteClaim): SiteClaim => ({ site, instance, gateway, firstMs, lastMs });
