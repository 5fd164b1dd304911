import { escapeIlp } from '../../questdb/ilp-escape.js';
import type { QuestDbClient } from '../../questdb/questdb-http.js';

/**
 * Site claims at a remote QuestDB, which has no central gateway to keep them: the gateways that
 * write into it keep them in a table of its own, `harbor_site_claims`, by the rule a central
 * gateway applies (claims/site-claims.ts). A row is a claim (`kind` claim: an instance says it
 * forwards under a site; its owner repeats it every few hours) or a release (`kind` release,
 * written by an operator: `INSERT INTO harbor_site_claims (time, site, kind) VALUES (now(), 'pier 7', 'release')`).
 * Rows take the remote QuestDB's clock. Walking a site's rows in time order: the first claim after
 * the last release owns the site; an owner not heard (no claim row of its own) for the expiry has
 * lapsed, and the next claim takes the site. Every gateway reads the same rows and comes to the
 * same owner; a gateway that does not own its site holds its readings of it. Two gateways that
 * claim within a moment of each other see both claims once QuestDB has applied them and agree on
 * the earlier; each reads the claims again at least every RECHECK_MS.
 */
export const CLAIMS_TABLE = 'harbor_site_claims';

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS ${CLAIMS_TABLE} (
  time TIMESTAMP, site SYMBOL, instance SYMBOL, gateway SYMBOL, kind SYMBOL, expiry_days LONG
) TIMESTAMP(time) PARTITION BY MONTH WAL`;

/** A site's claims are read again at least this often, so a rival claim is seen; by a gateway held, every RECHECK_HELD_MS, so it sees a release soon. */
export const RECHECK_MS = 30_000;
const RECHECK_HELD_MS = 5_000;
/** How long a claim written waits to be seen in the table (QuestDB applies WAL writes a moment later). */
const VISIBLE_WITHIN_MS = 10_000;

/** One row of the claims table: when (ms, the remote's clock), whose, what. */
export interface ClaimRow {
  timeMs: number;
  instance: string | null;
  kind: string;
}

/** The owner of a site by its rows (any order): the instance, or undefined when nobody owns it now. */
export function ownerOf(rows: readonly ClaimRow[], expiryMs: number, nowMs: number): { instance: string; lastMs: number } | undefined {
  const sorted = [...rows].sort((a, b) => a.timeMs - b.timeMs || (a.instance ?? '').localeCompare(b.instance ?? ''));
  let owner: { instance: string; lastMs: number } | undefined;
  for (const row of sorted) {
    if (row.kind === 'release') {
      owner = undefined;
      continue;
    }
    if (row.kind !== 'claim' || row.instance === null) continue;
    if (owner !== undefined && expiryMs > 0 && row.timeMs - owner.lastMs > expiryMs) owner = undefined;
    if (owner === undefined) owner = { instance: row.instance, lastMs: row.timeMs };
    else if (owner.instance === row.instance) owner.lastMs = row.timeMs;
  }
  if (owner !== undefined && expiryMs > 0 && nowMs - owner.lastMs > expiryMs) return undefined;
  return owner;
}

/** What a site's claim came to for this gateway. */
export type RemoteClaim = { owned: true } | { owned: false; owner: string };

interface Known {
  claim: RemoteClaim;
  checkedMs: number;
  /** When this gateway last wrote a claim row for the site. */
  wroteMs: number | undefined;
}

export class RemoteSiteClaims {
  readonly #questdb: Pick<QuestDbClient, 'exec' | 'write'>;
  readonly #instance: string;
  readonly #gateway: string;
  readonly #expiryMs: number;
  readonly #now: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #known = new Map<string, Known>();
  #tableReady = false;

  constructor(
    questdb: Pick<QuestDbClient, 'exec' | 'write'>,
    options: { instance: string; gateway: string; expiryMs: number; now?: () => number; sleep?: (ms: number) => Promise<void> },
  ) {
    this.#questdb = questdb;
    this.#instance = options.instance;
    this.#gateway = options.gateway;
    this.#expiryMs = options.expiryMs;
    this.#now = options.now ?? Date.now;
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /**
   * Whether this gateway may write its readings of `site`: read from the table at most every
   * RECHECK_MS, claimed when nobody owns it (and the claim seen in the table before it counts),
   * repeated by the owner every quarter of the expiry (6 hours at most). Throws when the remote
   * QuestDB cannot be asked: the delivery fails and is tried again.
   */
  async check(site: string): Promise<RemoteClaim> {
    const now = this.#now();
    const known = this.#known.get(site);
    if (known !== undefined && now - known.checkedMs < (known.claim.owned ? RECHECK_MS : RECHECK_HELD_MS)) return known.claim;
    await this.#prepare();
    const { rows, remoteNow } = await this.#rows(site, now);
    let owner = ownerOf(rows, this.#expiryMs, remoteNow);
    let wroteMs = known?.wroteMs;
    const mine = rows.filter((r) => r.instance === this.#instance && r.kind === 'claim').length;
    // Nobody owns it: claim, and count the claim once the table shows it beside any rival's.
    // A site owned by another gets one claim row of this gateway's, which shows the conflict.
    if (owner === undefined || (owner.instance !== this.#instance && !this.#claimedSinceRelease(rows))) {
      await this.#write(site);
      wroteMs = now;
      const seen = await this.#seen(site, mine, now);
      owner = ownerOf(seen.rows, this.#expiryMs, seen.remoteNow);
    } else if (owner.instance === this.#instance && (wroteMs === undefined || now - wroteMs > this.#heartbeatMs())) {
      await this.#write(site);
      wroteMs = now;
    }
    const claim: RemoteClaim = owner?.instance === this.#instance ? { owned: true } : { owned: false, owner: owner?.instance ?? 'nobody' };
    this.#known.set(site, { claim, checkedMs: now, wroteMs });
    return claim;
  }

  /** The owner repeats its claim every quarter of the expiry, at most every 6 hours; without an expiry once. */
  #heartbeatMs(): number {
    return this.#expiryMs > 0 ? Math.min(this.#expiryMs / 4, 6 * 3_600_000) : Number.POSITIVE_INFINITY;
  }

  /** This gateway has a claim row after the site's last release. */
  #claimedSinceRelease(rows: readonly ClaimRow[]): boolean {
    let claimed = false;
    for (const row of [...rows].sort((a, b) => a.timeMs - b.timeMs)) {
      if (row.kind === 'release') claimed = false;
      else if (row.kind === 'claim' && row.instance === this.#instance) claimed = true;
    }
    return claimed;
  }

  async #prepare(): Promise<void> {
    if (this.#tableReady) return;
    await this.#questdb.exec(CREATE_TABLE);
    this.#tableReady = true;
  }

  /**
   * A site's rows, and the remote's clock now (a lapse is judged by the clock that stamped the rows,
   * not this gateway's, which may be off); without rows, `now`.
   */
  async #rows(site: string, now: number): Promise<{ rows: ClaimRow[]; remoteNow: number }> {
    const answer = await this.#questdb.exec<{ dataset: [number, string | null, string | null, number][] }>(
      `SELECT cast(time AS LONG), instance, kind, cast(systimestamp() AS LONG) FROM ${CLAIMS_TABLE} WHERE site = '${site.replaceAll("'", "''")}'`,
    );
    const rows = answer.dataset.map(([micros, instance, kind]) => ({ timeMs: Math.floor(micros / 1000), instance, kind: kind ?? '' }));
    const remote = answer.dataset[0]?.[3];
    return { rows, remoteNow: remote === undefined ? now : Math.floor(remote / 1000) };
  }

  /** A claim row of this gateway's, at the remote's clock. */
  async #write(site: string): Promise<void> {
    const line =
      `${CLAIMS_TABLE},site=${escapeIlp(site)},instance=${escapeIlp(this.#instance)},gateway=${escapeIlp(this.#gateway)},kind=claim ` +
      `expiry_days=${Math.round(this.#expiryMs / 86_400_000)}i\n`;
    const outcome = await this.#questdb.write(Buffer.from(line));
    if (!outcome.ok) {
      this.#tableReady = false;
      throw new Error(`could not write the site claim to ${CLAIMS_TABLE}: ${outcome.message}`);
    }
  }

  /** The site's rows once the claim just written is among them. */
  async #seen(site: string, mineBefore: number, now: number): Promise<{ rows: ClaimRow[]; remoteNow: number }> {
    const deadline = this.#now() + VISIBLE_WITHIN_MS;
    for (;;) {
      const seen = await this.#rows(site, now);
      if (seen.rows.filter((r) => r.instance === this.#instance && r.kind === 'claim').length > mineBefore) return seen;
      if (this.#now() > deadline)
        throw new Error(`the site claim written to ${CLAIMS_TABLE} was not seen within ${VISIBLE_WITHIN_MS / 1000} s`);
      await this.#sleep(100);
    }
  }
}
