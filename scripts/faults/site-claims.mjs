// Two gateways claiming one site at a centre, under load: gateways A and B (data directories of
// their own, so two instances) forward under one SITE_ID to a central gateway, their readings on
// the same keys (time, ship, cargo) with values of their own (A's positive, B's negative). A claims
// the site first. The centre is killed -9 and started again while both send. Then B is renamed
// (restarted under a SITE_ID of its own) and sends on. Every reading A answered must be at the
// centre exactly once with A's value (nothing of B's over it); B's readings answered under the
// shared site none at the centre and every one of them a dead letter of B's upstream sink (held,
// then set aside at the rename: kept, not lost); B's readings under its new name exactly once.
// The centre must show the conflict in /status and a fleet_site_conflicts row while it lasts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { BASE_NS, isoOf, prng } from '../lib/crash-consistency.mjs';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { freePort } from '../lib/ports.mjs';
import { sql, waitForWalApplied } from '../lib/questdb-sql.mjs';

const KEY = 'site-claims-fault-key-0123456789';

/**
 * @typedef {{ answered: number, storedAsOwner: number, missing: number, duplicates: number, overwritten: number,
 *             claimantStored: number, claimantSetAside: number, claimantLost: number, renamedAnswered: number,
 *             renamedMissing: number, renamedDuplicates: number, strangers: number, conflictSeen: boolean,
 *             conflictRow: boolean, centreKills: number, refusedWhileConflict: number }} ClaimsReport
 *   `refusedWhileConflict`: the claimant's requests the centre had refused when it was asked, half-way to its kill.
 */

/**
 * @param {{ seconds: number, questdbUrl: string, bundlePath: string, seed?: number, log?: (line: string) => void }} options
 * @returns {Promise<{ pass: boolean, report: ClaimsReport }>}
 */
export async function runSiteClaims({ seconds, questdbUrl, bundlePath, seed = Date.now(), log = () => undefined }) {
  const random = prng(seed);
  const run = `${process.pid}_${Date.now()}`;
  const site = `shared-${run}`;
  const renamedSite = `renamed-${run}`;
  const dirs = { central: tmp('central'), a: tmp('a'), b: tmp('b') };
  const centralTable = `site_claims_central_${run}`;
  // A port of its own: the sites find the centre there again after its kill -9.
  const centralEnv = {
    PORT: String(await freePort()),
    API_KEY: KEY,
    DATA_DIR: dirs.central,
    SITE_ID: `claims-centre-${run}`,
    QUESTDB_URL: questdbUrl,
    QUESTDB_TABLE: centralTable,
    DURABILITY: 'process-crash',
    RETENTION_DAYS: '0',
    HEALTH_REPORT: 'false',
    FLUSH_INTERVAL_MS: '100',
    HOUSEKEEPING_CRON: '* * * * * *',
  };
  log(`site claims: ${seconds} s of load, seed ${seed}, site ${site}, table ${centralTable}`);
  /** @type {import('../lib/gateway-process.mjs').GatewayProcess[]} */
  const started = [];
  const start = async (/** @type {Record<string, string>} */ env) => {
    const gateway = await startGatewayProcess({ bundle: bundlePath, env });
    started.push(gateway);
    return gateway;
  };
  const stop = async (
    /** @type {import('../lib/gateway-process.mjs').GatewayProcess} */ gateway,
    signal = /** @type {NodeJS.Signals} */ ('SIGTERM'),
  ) => {
    gateway.child.kill(signal);
    await gateway.exited;
  };
  let central = await start(centralEnv);
  const siteEnv = (/** @type {string} */ dataDir, /** @type {string} */ siteId) => ({
    API_KEY: KEY,
    DATA_DIR: dataDir,
    SITE_ID: siteId,
    QUESTDB_URL: questdbUrl,
    QUESTDB_TABLE: `site_claims_${siteId.replaceAll('-', '_')}_${dataDir === dirs.a ? 'a' : 'b'}`,
    DURABILITY: 'process-crash',
    RETENTION_DAYS: '0',
    HEALTH_REPORT: 'false',
    FLUSH_INTERVAL_MS: '50',
    FLUSH_BACKOFF_MAX_MS: '500',
    UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
    UPSTREAM_API_KEY: KEY,
  });
  /** Answered readings: key `ship|ns since BASE_NS` → value, per gateway and site. @type {Record<'a' | 'b' | 'renamed', Map<string, number>>} */
  const answered = { a: new Map(), b: new Map(), renamed: new Map() };
  /** Keys sent without an answer (killed mid-request): may be stored once, under their sender's site. */
  const unknown = new Set();
  try {
    const a = await start(siteEnv(dirs.a, site));
    // A claims the site before B forwards anything.
    await post(a.url, [reading(0n, 1)]);
    answered.a.set(keyOf(0n), 1);
    await waitFor('the first gateway to claim the site', async () => (await status(central.url)).siteClaims?.sites === 2, 30_000);
    let b = await start(siteEnv(dirs.b, site));

    // Both send the same keys, A's values positive and B's negative, while the centre dies once.
    let alive = true;
    /** Each sender's next reading number: A's and B's run over the same keys. */
    const sequences = { a: 1n, b: 1n };
    const load = (/** @type {string} */ url, /** @type {'a' | 'b'} */ sender, /** @type {Map<string, number>} */ into) => async () => {
      const sign = sender === 'a' ? 1 : -1;
      while (alive) {
        const size = 1 + Math.floor(random() * 20);
        const batch = Array.from({ length: size }, (_, i) => sequences[sender] + BigInt(i));
        sequences[sender] += BigInt(size);
        const outcome = await post(
          url,
          batch.map((n) => reading(n, sign * Number(n))),
        );
        for (const n of batch) {
          if (outcome === 'ok') into.set(keyOf(n), sign * Number(n));
          else if (outcome === 'unknown') unknown.add(`${sign}|${keyOf(n)}`);
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const phase = [load(a.url, 'a', answered.a)(), load(b.url, 'b', answered.b)()];
    const half = (seconds * 1000) / 2;
    await new Promise((r) => setTimeout(r, half / 2));
    const during = await status(central.url);
    const conflict = (during.siteClaims?.conflicts ?? []).find((c) => c.site === site);
    central.child.kill('SIGKILL');
    await central.exited;
    central = await start(centralEnv);
    await new Promise((r) => setTimeout(r, half / 2));
    // Renamed under load: B's answers from now on are under its new name.
    alive = false;
    await Promise.all(phase);
    await stop(b);
    b = await start(siteEnv(dirs.b, renamedSite));
    alive = true;
    const renamedPhase = [load(a.url, 'a', answered.a)(), load(b.url, 'b', answered.renamed)()];
    await new Promise((r) => setTimeout(r, half));
    alive = false;
    await Promise.all(renamedPhase);

    // Everything delivered: A's and B's upstream backlogs gone (B's held readings set aside), the centre drained.
    for (const gateway of [a, b]) {
      await waitFor('the site delivered', async () => (await status(gateway.url)).sinks.every((s) => s.backlog === 0), 60_000).catch(
        async (error) => {
          throw new Error(`${error.message}: ${JSON.stringify((await status(gateway.url)).sinks)}`);
        },
      );
    }
    await waitFor('the centre drained', async () => (await status(central.url)).queue.readings === 0, 60_000).catch(async (error) => {
      throw new Error(`${error.message}: ${JSON.stringify((await status(central.url)).queue)}`);
    });
    const conflictRow =
      Number((await sql(questdbUrl, `SELECT count() FROM fleet_site_conflicts WHERE site = '${site}'`)).dataset[0]?.[0] ?? 0) > 0;
    for (const gateway of [a, b]) await stop(gateway);
    await stop(central);
    await waitForWalApplied(questdbUrl, centralTable, 30_000);

    const rows = /** @type {[string, string, number][]} */ (
      (await sql(questdbUrl, `SELECT site, cast(cast(time AS long) - ${BASE_NS} AS string), value FROM "${centralTable}"`)).dataset
    );
    /** @type {ClaimsReport} */
    const report = {
      answered: answered.a.size + answered.b.size + answered.renamed.size,
      storedAsOwner: 0,
      missing: 0,
      duplicates: 0,
      overwritten: 0,
      claimantStored: 0,
      claimantSetAside: 0,
      claimantLost: 0,
      renamedAnswered: answered.renamed.size,
      renamedMissing: 0,
      renamedDuplicates: 0,
      strangers: 0,
      conflictSeen: conflict !== undefined,
      conflictRow,
      centreKills: 1,
      refusedWhileConflict: conflict?.claimant.refusedRequests ?? 0,
    };
    /** @type {Map<string, number[]>} */
    const shared = new Map();
    /** @type {Map<string, number[]>} */
    const renamed = new Map();
    for (const [rowSite, offset, value] of rows) {
      const key = `pump|${offset}`;
      const into = rowSite === site ? shared : rowSite === renamedSite ? renamed : undefined;
      if (into === undefined) report.strangers += 1;
      else into.set(key, [...(into.get(key) ?? []), value]);
    }
    for (const [key, value] of answered.a) {
      const values = shared.get(key) ?? [];
      if (values.length === 0) report.missing += 1;
      if (values.length > 1) report.duplicates += values.length - 1;
      if (values.includes(value)) report.storedAsOwner += 1;
      if (values.some((v) => v !== value)) report.overwritten += 1;
    }
    for (const [key, values] of shared) {
      for (const v of values) {
        if (v < 0) report.claimantStored += 1;
        else if (!answered.a.has(key) && !unknown.has(`1|${key}`)) report.strangers += 1;
      }
    }
    for (const [key] of answered.renamed) {
      const values = renamed.get(key) ?? [];
      if (values.length === 0) report.renamedMissing += 1;
      if (values.length > 1) report.renamedDuplicates += values.length - 1;
    }
    for (const [key, values] of renamed) if (!answered.renamed.has(key) && !unknown.has(`-1|${key}`)) report.strangers += values.length;
    // B's readings of the shared site: every one set aside at B, none lost.
    const letters = new Database(join(dirs.b, 'queue.db'), { readonly: true });
    try {
      const set = new Set();
      const lines = /** @type {{ line: string }[]} */ (letters.prepare("SELECT line FROM dead_letters WHERE sink = 'upstream'").all());
      for (const { line } of lines) {
        for (const text of line.split('\n')) {
          const [time] = text.split('\t');
          set.add(`pump|${BigInt(/** @type {string} */ (time)) - BASE_NS}`);
        }
      }
      for (const key of answered.b.keys()) {
        if (set.has(key)) report.claimantSetAside += 1;
        else report.claimantLost += 1;
      }
    } finally {
      letters.close();
    }
    const pass =
      report.missing + report.duplicates + report.overwritten + report.claimantStored + report.claimantLost === 0 &&
      report.renamedMissing + report.renamedDuplicates + report.strangers === 0 &&
      report.storedAsOwner === answered.a.size &&
      report.claimantSetAside === answered.b.size &&
      answered.b.size > 0 &&
      report.conflictSeen &&
      report.conflictRow;
    log(`site claims: ${pass ? 'PASS' : 'FAIL'} ${JSON.stringify(report)}`);
    return { pass, report };
  } finally {
    for (const gateway of started) if (gateway.child.exitCode === null && gateway.child.signalCode === null) await stop(gateway, 'SIGKILL');
    for (const dir of Object.values(dirs)) rmSync(dir, { recursive: true, force: true });
  }
}

const tmp = (/** @type {string} */ label) => mkdtempSync(join(tmpdir(), `harbor-site-claims-${label}-`));
const keyOf = (/** @type {bigint} */ n) => `pump|${n}`;
const reading = (/** @type {bigint} */ n, /** @type {number} */ value) => ({
  time: isoOf(BASE_NS + n),
  ship_id: 'pump',
  cargo_id: 'pressure',
  value,
});

/** Posts a batch: 'ok' on 2xx, 'error' on a refusal, 'unknown' without an answer. @returns {Promise<'ok' | 'error' | 'unknown'>} */
async function post(/** @type {string} */ url, /** @type {unknown[]} */ body) {
  try {
    const response = await fetch(`${url}/api/v2/ingest/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify(body),
    });
    await response.arrayBuffer();
    return response.ok ? 'ok' : 'error';
  } catch {
    return 'unknown';
  }
}

/** @typedef {{ queue: { readings: number }, sinks: { backlog: number }[], siteClaims?: { sites: number, conflicts: { site: string, claimant: { refusedRequests: number } }[] } | null }} Status */

/** @returns {Promise<Status>} */
async function status(/** @type {string} */ url) {
  return /** @type {Status} */ (await (await fetch(`${url}/status`, { headers: { 'x-api-key': KEY } })).json());
}

async function waitFor(/** @type {string} */ what, /** @type {() => Promise<boolean>} */ condition, /** @type {number} */ timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await condition()) return;
    } catch {
      // Not answering yet.
    }
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
