// A disk filled by the queue itself, under load: the gateway's DATA_DIR is a small tmpfs of its own
// (a private mount namespace), QuestDB is away (a proxy refuses), and devices push readings until
// the queue fills the disk and ingest answers 503. Then QuestDB comes back while the devices go on:
// the backlog must be delivered, ingest must take readings again by itself, the delivery thread
// must not die, and while ingest cannot write /readyz must say not ready and every request sent be
// refused. Afterwards every reading answered 2xx is in QuestDB exactly once and none answered
// otherwise is there.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BASE_NS, isoOf, storedKeys } from '../lib/crash-consistency.mjs';
import { FaultProxy } from '../lib/fault-proxy.mjs';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { waitForWalApplied } from '../lib/questdb-sql.mjs';

const KEY = 'full-disk-test-key-0123456789';

/**
 * @param {{ bundlePath: string, questdbUrl: string, diskMb?: number, afterMs?: number, log?: (line: string) => void }} options
 *   `diskMb`: the tmpfs size; `afterMs`: how long the devices go on once QuestDB is back.
 */
export async function runFullDisk({ bundlePath, questdbUrl, diskMb = 8, afterMs = 15_000, log = () => undefined }) {
  const proxy = await FaultProxy.start(questdbUrl);
  proxy.set('refuse');
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-full-disk-'));
  const table = `full_disk_${process.pid}_${Date.now()}`;
  const gateway = await startGatewayProcess({
    bundle: bundlePath,
    wrap: ['unshare', '--map-root-user', '--mount', 'sh', '-c', `mount -t tmpfs -o size=${diskMb}m tmpfs "$DATA_DIR" && exec "$@"`, 'sh'],
    env: {
      API_KEY: KEY,
      DATA_DIR: dataDir,
      QUESTDB_URL: proxy.url,
      QUESTDB_TABLE: table,
      DURABILITY: 'power-loss',
      QUEUE_MAX_BYTES: '1GiB',
      FLUSH_INTERVAL_MS: '50',
      FLUSH_BACKOFF_MAX_MS: '500',
      REPLAY_WINDOW_MS: '5000',
      HEALTH_REPORT: 'false',
      RETENTION_DAYS: '0',
    },
    timeoutMs: 15_000,
  });
  /** @type {Map<string, 'ok' | 'error' | 'unknown'>} */
  const ledger = new Map();
  const counts = { requests: 0, diskFull: 0, okAfterFull: 0, okWhileFull: 0 };
  let phase = /** @type {'filling' | 'full' | 'back'} */ ('filling');
  let sequence = 0n;
  let running = true;
  const device = async (/** @type {number} */ id) => {
    while (running) {
      const size = 1 + ((Number(sequence) * 7 + id) % 120);
      const readings = Array.from({ length: size }, () => {
        sequence += 1n;
        return {
          ship_id: `device-${id}`,
          cargo_id: 'seq',
          time: isoOf(BASE_NS + sequence),
          value: Number(sequence),
          key: `device-${id}|${sequence}`,
        };
      });
      let outcome = /** @type {'ok' | 'error' | 'unknown'} */ ('unknown');
      // Sent after the first refusal was seen and before QuestDB is back: ingest must refuse it.
      const sentWhileFull = phase === 'full';
      try {
        const response = await fetch(`${gateway.url}/api/v2/ingest/batch`, {
          method: 'POST',
          headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
          body: JSON.stringify(readings.map(({ key: _, ...reading }) => reading)),
        });
        const body = /** @type {{ details?: { type: string }[] }} */ (await response.json());
        outcome = response.status === 200 ? 'ok' : 'error';
        if (body.details?.[0]?.type === 'queue_disk_full') counts.diskFull += 1;
        if (outcome === 'ok' && phase === 'back' && counts.diskFull > 0) counts.okAfterFull += 1;
        if (outcome === 'ok' && sentWhileFull) counts.okWhileFull += 1;
      } catch {
        // Not answered: it may or may not be stored; it counts for neither side.
      }
      counts.requests += 1;
      for (const reading of readings) ledger.set(reading.key, outcome);
      if (outcome !== 'ok') await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const status = async () =>
    /** @type {{ queue: { readings: number }, sinks: { backlog: number }[] }} */ (
      await (await fetch(`${gateway.url}/status`, { headers: { 'x-api-key': KEY } })).json()
    );
  const ready = async () => (await fetch(`${gateway.url}/readyz`)).status === 200;

  const load = Promise.all([0, 1, 2, 3].map((id) => device(id)));
  let readyWhileFull = 0;
  let fullChecks = 0;
  let failure = '';
  try {
    const fillBy = Date.now() + 120_000;
    while (counts.diskFull === 0) {
      if (Date.now() > fillBy) throw new Error('the disk did not fill within 120 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    phase = 'full';
    log(`disk full after ${counts.requests} requests; QuestDB away for 3 s more`);
    for (let i = 0; i < 6; i++) {
      fullChecks += 1;
      if (await ready()) readyWhileFull += 1;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    proxy.set('pass');
    phase = 'back';
    log('QuestDB back; devices go on');
    await new Promise((resolve) => setTimeout(resolve, afterMs));
  } catch (error) {
    failure = /** @type {Error} */ (error).message;
  } finally {
    running = false;
    await load;
  }
  const drainBy = Date.now() + 90_000;
  for (;;) {
    const now = await status();
    if (now.queue.readings === 0 && now.sinks.every((s) => s.backlog === 0)) break;
    if (Date.now() > drainBy) {
      failure ||= `the backlog did not drain: ${now.queue.readings} readings left`;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // Once the replay window let the delivered readings go, their room is the queue's again.
  let readyAtEnd = false;
  for (const readyBy = Date.now() + 30_000; !readyAtEnd && Date.now() < readyBy; ) {
    readyAtEnd = await ready();
    if (!readyAtEnd) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const deliveryDeaths = gateway.logs.filter((l) => l.event === 'delivery_exited').length;
  const reserveUsed = gateway.logs.some((l) => l.event === 'queue_reserve_used');
  gateway.child.kill('SIGTERM');
  await gateway.exited;
  await proxy.close();
  await waitForWalApplied(questdbUrl, table, 30_000);
  const stored = await storedKeys(questdbUrl, table);
  const report = { answered: 0, refused: 0, unknown: 0, stored: 0, lost: 0, duplicates: 0, refusedButStored: 0, strangers: 0 };
  for (const count of stored.values()) report.stored += count;
  for (const [key, outcome] of ledger) {
    if (outcome === 'ok') {
      report.answered += 1;
      if (!stored.has(key)) report.lost += 1;
    } else if (outcome === 'error') {
      report.refused += 1;
      if (stored.has(key)) report.refusedButStored += 1;
    } else report.unknown += 1;
  }
  for (const [key, count] of stored) {
    if (!ledger.has(key)) report.strangers += 1;
    if (count > 1) report.duplicates += count - 1;
  }
  rmSync(dataDir, { recursive: true, force: true });
  const summary = {
    ...report,
    diskFullAnswers: counts.diskFull,
    answeredWhileFull: counts.okWhileFull,
    answeredAfterQuestDbBack: counts.okAfterFull,
    readyWhileFull: `${readyWhileFull} of ${fullChecks}`,
    readyAtEnd,
    deliveryDeaths,
    reserveUsed,
    failure,
  };
  const ok =
    failure === '' &&
    report.lost === 0 &&
    report.duplicates === 0 &&
    report.refusedButStored === 0 &&
    report.strangers === 0 &&
    counts.diskFull > 0 &&
    counts.okAfterFull > 0 &&
    counts.okWhileFull === 0 &&
    readyWhileFull === 0 &&
    readyAtEnd &&
    deliveryDeaths === 0;
  log(`disk filled by the queue: ${ok ? 'PASS' : 'FAIL'} ${JSON.stringify(summary)}`);
  return { ok, summary };
}
