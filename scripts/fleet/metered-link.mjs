// Two sites forwarding to a centre, each over a metered link of its own, a throttling proxy
// (scripts/lib/link-proxy.mjs; this machine's kernel has no netem): 64 kbit/s, 300 ms each way
// (600 ms round trip), 1 % of segments lost each way and sent again a timeout later. An outage cuts
// both links (connections ended and refused) while the devices go on; time runs `--compress` times
// faster than the clock (the readings' times and their rate), so a 30-minute outage takes a minute.
//
// - site `whole`: every reading forwarded, UPSTREAM_ORDER=current_first, a bandwidth budget;
// - site `thinned`: the catalogue's deadband on its temperatures and levels (oldest first).
//
// Reports, per site: bytes on its link per reading answered (IP packets both ways, as the proxy
// counts them), the time from the link's return until the centre holds the site's newest reading of the
// moment of return, and the exact accounting: the centre holds every answered reading of `whole`
// once, and of `thinned` exactly the subset a plain deadband over the answered readings chooses.
//
//   node scripts/fleet/metered-link.mjs [--outage-minutes 30] [--compress 30] [--before-s 20]
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { LinkProxy } from '../lib/link-proxy.mjs';
import { projectRoot } from '../lib/paths.mjs';
import { freePort } from '../lib/ports.mjs';
import { sql } from '../lib/questdb-sql.mjs';
import { startQuestDb } from '../lib/questdb.mjs';

const { values: args } = parseArgs({
  options: {
    'outage-minutes': { type: 'string', default: '30' },
    compress: { type: 'string', default: '30' },
    'before-s': { type: 'string', default: '20' },
  },
});

const LINK = { bitsPerS: 64_000, delayMs: 300, loss: 0.01 };
/** Each site's series: one reading every 10 s of reading time each. */
const SERIES = ['temp_hold1', 'temp_hold2', 'temp_reefer', 'level_fuel', 'level_ballast', 'pump_rpm'];
const PERIOD_S = 10;
const DEADBAND = { temp: 0.3, level: 1 };
const MAX_INTERVAL_MINUTES = 5;
const CATALOGUE = `thinning:
  - match: temp*
    deadband: ${DEADBAND.temp}
    max_interval_minutes: ${MAX_INTERVAL_MINUTES}
  - match: level*
    deadband: ${DEADBAND.level}
    max_interval_minutes: ${MAX_INTERVAL_MINUTES}
`;

/** @typedef {{ ms: number, cargo: string, value: number }} Reading */
const SITES = /** @type {const} */ (['whole', 'thinned']);

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (/** @type {string} */ line) => process.stdout.write(`${line}\n`);
async function run() {
  const outageMinutes = Number(args['outage-minutes']);
  const compress = Number(args.compress);
  const beforeS = Number(args['before-s']);
  const dir = mkdtempSync(join(tmpdir(), 'harbor-metered-'));
  const bundle = join(projectRoot, 'dist', 'gateway.mjs');
  const questdb = await startQuestDb({ dataDir: join(dir, 'questdb') });
  const centralKey = randomBytes(18).toString('base64url');
  const siteKey = randomBytes(18).toString('base64url');
  const stamp = Date.now();
  const centralTable = `metered_central_${stamp}`;
  const centralPort = await freePort();
  const processes = [];
  /** @type {Record<string, LinkProxy>} */
  let links = {};
  try {
    const central = await startGatewayProcess({
      bundle,
      env: {
        HOST: '0.0.0.0',
        PORT: String(centralPort),
        API_KEY: centralKey,
        DATA_DIR: join(dir, 'central'),
        QUESTDB_URL: questdb.httpUrl,
        QUESTDB_TABLE: centralTable,
        HEALTH_REPORT: 'false',
        RETENTION_DAYS: '0',
        FLUSH_INTERVAL_MS: '200',
      },
    });
    processes.push(central);
    // One link per site, each its own proxy in front of the centre.
    links = {
      whole: await LinkProxy.start('127.0.0.1', { targetPort: centralPort, ...LINK }),
      thinned: await LinkProxy.start('127.0.0.1', { targetPort: centralPort, ...LINK }),
    };
    const setLinks = (/** @type {boolean} */ up) => {
      for (const link of Object.values(links)) up ? link.restore() : link.cut();
    };
    const linkBytes = () => ({ whole: links.whole?.bytes ?? 0, thinned: links.thinned?.bytes ?? 0 });

    const catalogue = join(dir, 'catalogue.yaml');
    writeFileSync(catalogue, CATALOGUE);
    /** @type {Record<string, import('../lib/gateway-process.mjs').GatewayProcess>} */
    const sites = {};
    for (const [name, link] of Object.entries(links)) {
      sites[name] = await startGatewayProcess({
        bundle,
        env: {
          SITE_ID: `metered-${name}`,
          API_KEY: siteKey,
          DATA_DIR: join(dir, name),
          QUESTDB_URL: questdb.httpUrl,
          QUESTDB_TABLE: `metered_site_${name}_${stamp}`,
          HEALTH_REPORT: 'false',
          RETENTION_DAYS: '0',
          FLUSH_INTERVAL_MS: '1000',
          // Retries at most 5 s apart: the link's return is found within seconds.
          FLUSH_BACKOFF_MAX_MS: '5000',
          UPSTREAM_URL: `http://127.0.0.1:${link.port}/api/v2/ingest/batch`,
          UPSTREAM_API_KEY: centralKey,
          UPSTREAM_TIMEOUT_MS: '20000',
          ...(name === 'whole'
            ? { UPSTREAM_ORDER: 'current_first', UPSTREAM_BATCH_READINGS: '200', UPSTREAM_MAX_BYTES_PER_S: '3000' }
            : { CATALOGUE_FILE: catalogue }),
        },
      });
      processes.push(sites[name]);
    }

    // The devices: each site's series, a reading every PERIOD_S of reading time, time `compress` times faster.
    const startWall = Date.now();
    const startReading = startWall - 2 * 3_600_000;
    const readingTime = (/** @type {number} */ wall) => startReading + (wall - startWall) * compress;
    /** @type {Record<string, { ms: number, cargo: string, value: number }[]>} */
    /** @type {{ whole: Reading[], thinned: Reading[] }} */
    const answered = { whole: [], thinned: [] };
    const values = new Map();
    let tick = 0;
    let running = true;
    const devices = (async () => {
      while (running) {
        const ms = startReading + tick * PERIOD_S * 1000;
        while (readingTime(Date.now()) < ms) await sleep(5);
        for (const name of SITES) {
          const site = /** @type {import('../lib/gateway-process.mjs').GatewayProcess} */ (sites[name]);
          const readings = SERIES.map((cargo) => {
            const key = `${name}:${cargo}`;
            const step = cargo === 'pump_rpm' ? (Math.random() - 0.5) * 200 : (Math.random() - 0.5) * 0.4;
            const value = Math.round(((values.get(key) ?? (cargo === 'pump_rpm' ? 1200 : 20)) + step) * 100) / 100;
            values.set(key, value);
            return { ms, cargo, value };
          });
          const body = readings.map((r) => ({ time: new Date(r.ms).toISOString(), ship_id: 'ship-1', cargo_id: r.cargo, value: r.value }));
          const response = await fetch(`${site.url}/api/v2/ingest/batch`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': siteKey },
            body: JSON.stringify(body),
          });
          if (response.status !== 200) throw new Error(`site ${name} answered ${response.status}`);
          answered[name].push(...readings);
        }
        tick += 1;
      }
    })();

    const newestAtCentre = async (/** @type {string} */ name) => {
      const answer = await sql(questdb.httpUrl, `SELECT max(time) FROM '${centralTable}' WHERE site = 'metered-${name}'`).catch(
        () => undefined,
      );
      const text = answer?.dataset[0]?.[0];
      return typeof text === 'string' ? msOf(text) : Number.NEGATIVE_INFINITY;
    };

    await sleep(beforeS * 1000);
    const bytesBefore = linkBytes();
    const cutAt = Date.now();
    setLinks(false);
    say(`links cut for ${outageMinutes} min of reading time (${((outageMinutes * 60) / compress).toFixed(0)} s)`);
    await sleep(((outageMinutes * 60) / compress) * 1000);
    setLinks(true);
    const back = Date.now();
    const newestAtReturn = answered.whole.at(-1)?.ms ?? 0;
    const newestThinnedAtReturn = answered.thinned.at(-1)?.ms ?? 0;
    const backlog = { whole: answered.whole.filter((r) => r.ms > readingTime(cutAt)).length };
    say(`links back after ${((back - cutAt) / 1000).toFixed(1)} s; site whole holds ${backlog.whole} readings of the outage`);
    /** @type {Record<string, number | undefined>} */
    const current = {};
    while (current.whole === undefined || current.thinned === undefined) {
      if (Date.now() - back > 900_000) throw new Error('the centre was not current within 15 minutes');
      if (current.whole === undefined && (await newestAtCentre('whole')) >= newestAtReturn) current.whole = Date.now() - back;
      if (current.thinned === undefined && (await newestAtCentre('thinned')) >= newestThinnedAtReturn - MAX_INTERVAL_MINUTES * 60_000)
        current.thinned = Date.now() - back;
      await sleep(200);
    }
    await sleep(5000);
    running = false;
    await devices;
    // Both sites drained: every backlog empty.
    for (const [name, site] of Object.entries(sites)) {
      for (;;) {
        const status = /** @type {{ sinks: { backlog: number }[] }} */ (
          await (await fetch(`${site.url}/status`, { headers: { 'x-api-key': siteKey } })).json()
        );
        if (status.sinks.every((/** @type {{ backlog: number }} */ s) => s.backlog === 0)) break;
        if (Date.now() - back > 1_200_000) throw new Error(`site ${name} did not drain`);
        await sleep(500);
      }
    }
    await sleep(3000);
    const bytesAfter = linkBytes();
    const endWall = Date.now();

    // Accounting.
    const rows = /** @type {[string, string, string, number][]} */ (
      (await sql(questdb.httpUrl, `SELECT site, time, cargo_id, value FROM '${centralTable}'`)).dataset
    );
    const atCentre = (/** @type {string} */ name) =>
      rows
        .filter((r) => r[0] === `metered-${name}`)
        .map((r) => `${msOf(r[1])}\t${r[2]}\t${r[3]}`)
        .sort();
    const line = (/** @type {{ ms: number, cargo: string, value: number }} */ r) => `${r.ms}\t${r.cargo}\t${r.value}`;
    const expectedWhole = answered.whole.map(line).sort();
    const expectedThinned = deadbandSubset(answered.thinned).map(line).sort();
    const same = (/** @type {string[]} */ a, /** @type {string[]} */ b) => a.length === b.length && a.every((x, i) => x === b[i]);
    const result = {
      compress,
      outageMinutes,
      wallSeconds: Math.round((endWall - startWall) / 1000),
      whole: {
        answered: answered.whole.length,
        atCentre: atCentre('whole').length,
        exactlyOnce: same(atCentre('whole'), expectedWhole),
        bytesPerReading: Math.round(bytesAfter.whole / answered.whole.length),
        bytesPerReadingOutsideOutage: Math.round(
          bytesBefore.whole / Math.max(1, answered.whole.filter((r) => r.ms <= readingTime(cutAt)).length),
        ),
        secondsUntilCurrent: (current.whole ?? 0) / 1000,
      },
      thinned: {
        answered: answered.thinned.length,
        subset: expectedThinned.length,
        atCentre: atCentre('thinned').length,
        exactlyTheSubset: same(atCentre('thinned'), expectedThinned),
        bytesPerReading: Math.round(bytesAfter.thinned / answered.thinned.length),
        secondsUntilWithinMaxInterval: (current.thinned ?? 0) / 1000,
      },
    };
    say(JSON.stringify(result, null, 2));
    process.exitCode = result.whole.exactlyOnce && result.thinned.exactlyTheSubset ? 0 : 1;
  } finally {
    for (const p of processes) p.child.kill('SIGKILL');
    for (const link of Object.values(links)) await link.close();
    await questdb.stop();
  }
}

/** A time as QuestDB writes it (up to nanoseconds) in milliseconds. */
const msOf = (/** @type {string} */ text) => Date.parse(`${text.slice(0, 23)}Z`);

/** The plain deadband the catalogue asks for, over the readings in the order they were answered. */
function deadbandSubset(/** @type {{ ms: number, cargo: string, value: number }[]} */ readings) {
  const last = new Map();
  return readings.filter((r) => {
    const band = r.cargo.startsWith('temp') ? DEADBAND.temp : r.cargo.startsWith('level') ? DEADBAND.level : undefined;
    if (band === undefined) return true;
    const before = last.get(r.cargo);
    const goes = before === undefined || Math.abs(r.value - before.value) > band || r.ms - before.ms >= MAX_INTERVAL_MINUTES * 60_000;
    if (goes) last.set(r.cargo, r);
    return goes;
  });
}

await run();
