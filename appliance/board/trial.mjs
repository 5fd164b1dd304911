// The trial of a new release (harbor-update confirm, on the trial boot): kept once the gateway is
// ready on its queue and the local QuestDB answers, given up only when the release itself fails.
// What is slow or fails now and then around it (systemd killing a gateway that started too slowly
// on a loaded board, RAUC's D-Bus activation timing out) is waited out or tried again within the
// trial's time; the reason a trial failed is the gateway's own words.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BOOT_DIR, bootedSlot, readBootState } from './boot-state.mjs';
import { writeAtomic } from './files.mjs';
import { UPDATE_ENV, credentialFile } from './firstboot.mjs';
import { QUEUE_SNAPSHOT } from './handover.mjs';
import { rauc } from './rauc.mjs';
import {
  UPDATE_DIR,
  UPDATE_ISSUE,
  audit,
  finishTrial,
  log,
  oneLine,
  readTrial,
  releaseInfo,
  run,
  sleep,
  warn,
  writeResult,
  writeTrialRecord,
} from './records.mjs';
import { parseEnvText } from './settings.mjs';
import { unitEnvironment } from './unit.mjs';

/**
 * How long a trial may take to be ready. QuestDB's first start on a new slot took about 420 s on a
 * loaded emulated board (a minute or two on a Raspberry Pi): twice that, since a good release rolled
 * back by a short limit costs the site its update, while a long one only delays the return from a
 * release that hangs (one whose gateway fails is given up at once).
 */
export const DEFAULT_TRIAL_SECONDS = 900;
/** Marking the slot good is tried for at least this long, even when the trial's time is nearly spent. */
const MARK_GOOD_MS = 180_000;
const POLL_MS = 3000;

/**
 * How systemd ended a run of the gateway that is no fault of the release: the start or a watchdog
 * ping took longer than the unit allows, which a loaded board does now and then. systemd starts it
 * again; the trial waits for it within its time.
 */
const SLOW_RESULTS = new Set(['timeout', 'watchdog']);

/**
 * A journal entry as `journalctl --output=json` gives it: MESSAGE (text, or bytes when it is not
 * UTF-8), the sender's pid, and the fields systemd adds to its messages about a unit.
 * @typedef {{ MESSAGE?: string | number[], _PID?: string, UNIT?: string, UNIT_RESULT?: string, EXIT_STATUS?: string }} JournalEntry
 */

const messageOf = (/** @type {JournalEntry} */ entry) =>
  Array.isArray(entry.MESSAGE) ? Buffer.from(entry.MESSAGE).toString('utf8') : (entry.MESSAGE ?? '');

/**
 * What the journal of this boot says about the gateway's runs: how systemd ended each one that
 * ended (its result: exit-code, signal, timeout, watchdog, ...) and the gateway's own last words
 * about a failure: its last error or fatal log line (pino, level 50 and up, with the error's
 * message), else the last line its runtime printed about an uncaught error or a refused setting.
 * @param {JournalEntry[]} entries  oldest first
 */
export function readGatewayJournal(entries) {
  /** @type {string[]} */
  const results = [];
  /** @type {string | undefined} */
  let words;
  /** @type {string | undefined} */
  let exitStatus;
  for (const entry of entries) {
    const message = messageOf(entry);
    if (entry._PID === '1') {
      const result = entry.UNIT_RESULT ?? /Failed with result '([\w-]+)'/.exec(message)?.[1];
      if (result !== undefined) results.push(result);
      exitStatus = entry.EXIT_STATUS ?? /status=(\d+)/.exec(message)?.[1] ?? exitStatus;
      continue;
    }
    const said = gatewayError(message);
    if (said !== undefined) words = said;
  }
  return { results, words, exitStatus };
}

/** The error a line of the gateway states, or undefined when it states none. */
function gatewayError(/** @type {string} */ line) {
  if (line.startsWith('{')) {
    try {
      const entry = JSON.parse(line);
      if (typeof entry.level !== 'number' || entry.level < 50) return undefined;
      const cause = entry.err?.message;
      return typeof cause === 'string' && cause !== '' && !String(entry.msg).includes(cause) ? `${entry.msg}: ${cause}` : String(entry.msg);
    } catch {
      return undefined;
    }
  }
  // Node's report of an uncaught error ("Error: ...", "TypeError: ..."), the gateway's refusal of its settings.
  return /^(?:\w*Error(?: \[\w+\])?: |harbor-gateway: )/.test(line) ? line : undefined;
}

/**
 * Whether the gateway's runs so far fail the trial: any run the release ended itself (it exited,
 * crashed, was refused its settings) does; runs systemd ended because the board was slow do not,
 * while time is left.
 * @param {{ results: string[], words: string | undefined, exitStatus: string | undefined }} journal
 * @param {Record<string, string>} unit  `systemctl show` of harbor-gateway.service
 * @returns {{ failed: string } | { slow: string } | undefined}
 */
export function judgeGateway(journal, unit) {
  const own = journal.results.filter((result) => !SLOW_RESULTS.has(result));
  const failedNow = unit['ActiveState'] === 'failed';
  if (own.length > 0 || (failedNow && journal.results.length === 0)) {
    const status = journal.exitStatus ?? unit['ExecMainStatus'];
    const how = [own[0] ?? unit['Result'], status === undefined || status === '0' ? undefined : `exit status ${status}`]
      .filter((part) => part !== undefined && part !== '')
      .join(', ');
    return {
      failed:
        journal.words === undefined
          ? `the gateway stopped (${how}) without a log line saying why`
          : `the gateway stopped: ${journal.words} (${how})`,
    };
  }
  if (journal.results.length > 0) {
    const restarts = journal.results.length;
    return {
      slow: `systemd restarted the gateway ${restarts === 1 ? 'once' : `${restarts} times`} after a ${journal.results.at(-1)} (the board was slow)`,
    };
  }
  return undefined;
}

function gatewayUnit() {
  const unit = run('systemctl', ['show', 'harbor-gateway.service', '--property=ActiveState,SubState,Result,ExecMainStatus,NRestarts'], {
    quiet: true,
  });
  return Object.fromEntries(
    unit.stdout
      .trim()
      .split('\n')
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

function gatewayJournal() {
  const journal = run('journalctl', ['--unit=harbor-gateway.service', '--boot', '--output=json', '--no-pager'], { quiet: true });
  /** @type {JournalEntry[]} */
  const entries = [];
  for (const line of journal.stdout.split('\n')) {
    if (line === '') continue;
    try {
      entries.push(JSON.parse(line));
    } catch {
      // a line journalctl cut: skipped
    }
  }
  return readGatewayJournal(entries);
}

/** The conditions of a good trial, as one pass over the running system. */
async function trialChecks(/** @type {{ port: string, questdb: boolean }} */ expected) {
  /** @type {string[]} */
  const waiting = [];
  const unit = gatewayUnit();
  const verdict = judgeGateway(gatewayJournal(), unit);
  if (verdict !== undefined && 'failed' in verdict) return { failed: verdict.failed };
  if (verdict !== undefined) {
    waiting.push(verdict.slow);
    // A unit systemd gave up on for slowness alone is started again while the trial has time.
    if (unit['ActiveState'] === 'failed') run('systemctl', ['reset-failed', 'harbor-gateway.service'], { quiet: true });
    if (unit['ActiveState'] === 'failed') run('systemctl', ['start', '--no-block', 'harbor-gateway.service'], { quiet: true });
  }
  if (unit['ActiveState'] !== 'active') waiting.push(`harbor-gateway.service is ${unit['ActiveState']}/${unit['SubState']}`);
  try {
    const ready = await fetch(`http://127.0.0.1:${expected.port}/readyz`, { signal: AbortSignal.timeout(5000) });
    if (!ready.ok) waiting.push(`the gateway is not ready: ${oneLine(await ready.text(), 200)}`);
  } catch (error) {
    waiting.push(`the gateway does not answer: ${/** @type {Error} */ (error).message}`);
  }
  if (expected.questdb) {
    try {
      const health = await fetch('http://127.0.0.1:9003/', { headers: questdbAuthorization(), signal: AbortSignal.timeout(5000) });
      if (!health.ok) waiting.push(`QuestDB answers ${health.status}`);
    } catch (error) {
      waiting.push(`QuestDB does not answer: ${/** @type {Error} */ (error).message}`);
    }
  }
  return { waiting };
}

/**
 * QuestDB's health port asks for the HTTP credentials once they are set (it answers 401 without
 * them, which would keep every trial from being confirmed): the site's password and the user of
 * QuestDB's unit, so the check also proves that QuestDB takes the password the gateway uses.
 * @returns {Record<string, string>}
 */
function questdbAuthorization() {
  const password = `/${credentialFile('questdb_password')}`;
  if (!existsSync(password)) return {};
  const unit = '/etc/systemd/system/harbor-questdb.service';
  const user = (existsSync(unit) ? unitEnvironment(readFileSync(unit, 'utf8'))['QDB_HTTP_USER'] : undefined) ?? 'admin';
  return { authorization: `Basic ${Buffer.from(`${user}:${readFileSync(password, 'utf8').trim()}`).toString('base64')}` };
}

/** What the checks need: the gateway's port, whether a local QuestDB is on, the trial's time limit. */
export function trialSettings() {
  const read = (/** @type {string} */ path) => (existsSync(path) ? parseEnvText(readFileSync(path, 'utf8')) : {});
  const gateway = read('/etc/harbor-gateway/gateway.env');
  const update = read(`/${UPDATE_ENV}`);
  return {
    port: gateway['PORT'] ?? '8000',
    questdb: (gateway['LOCAL_QUESTDB'] ?? 'on') !== 'off',
    trialSeconds: Number(update['UPDATE_TRIAL_SECONDS'] ?? DEFAULT_TRIAL_SECONDS),
  };
}

/**
 * Marks the slot good, trying again while RAUC does not answer (its D-Bus activation times out on a
 * loaded board): until the trial's time is spent, and for MARK_GOOD_MS at least.
 * @param {number} deadline
 * @returns {Promise<{ ok: true } | { ok: false, reason: string }>}
 */
async function markGood(deadline) {
  const started = Date.now();
  const until = Math.max(deadline, started + MARK_GOOD_MS);
  for (let attempt = 1; ; attempt++) {
    const good = rauc(['status', 'mark-good'], true);
    if (good.ok) {
      if (attempt > 1) log(`the slot was marked good at attempt ${attempt}`);
      return { ok: true };
    }
    if (Date.now() + 10_000 > until)
      return {
        ok: false,
        reason: `RAUC did not mark the slot good in ${attempt} attempts over ${Math.round((Date.now() - started) / 1000)} s; its last answer: ${oneLine(good.stderr, 300)}`,
      };
    warn(`RAUC could not mark the slot good yet (attempt ${attempt}: ${oneLine(good.stderr, 300)}); trying again`);
    // Started directly rather than through D-Bus activation, which gives up after 25 s.
    run('systemctl', ['start', 'rauc.service'], { quiet: true, timeout: 120_000 });
    await sleep(5000);
  }
}

/**
 * On a trial boot: confirm the slot or give it up, and say which and why.
 * @param {{ refreshBanner: () => void }} hooks
 */
export async function confirm({ refreshBanner }) {
  const booted = bootedSlot();
  const trial = readTrial();
  if (!booted.trial) return 0;
  // RAUC is needed at the end of the trial: started now, it is up by then.
  run('systemctl', ['start', '--no-block', 'rauc.service'], { quiet: true });
  // The bundle's version, as the installation and the report name it; the slot's own release file
  // only when no installation was recorded.
  const version = trial?.to ?? releaseInfo()['APPLIANCE_VERSION'] ?? '';
  const settings = trialSettings();
  const deadline = Date.now() + settings.trialSeconds * 1000;
  log(
    `slot ${booted.slot} runs ${version} on trial: waiting up to ${settings.trialSeconds} s for the gateway on its queue${settings.questdb ? ' and the local QuestDB' : ''}`,
  );
  /** @type {string | undefined} */
  let failure;
  let waiting = ['nothing checked yet'];
  let told = '';
  for (;;) {
    const checks = await trialChecks({ port: settings.port, questdb: settings.questdb });
    if ('failed' in checks) {
      failure = checks.failed;
      break;
    }
    waiting = checks.waiting;
    if (waiting.length === 0) break;
    if (waiting[0] !== told && waiting[0]?.startsWith('systemd restarted')) warn(`${waiting[0]}; the trial goes on`);
    told = waiting[0] ?? '';
    if (Date.now() > deadline) {
      failure = `not ready within ${settings.trialSeconds} s: ${waiting.join('; ')}`;
      break;
    }
    await sleep(POLL_MS);
  }
  const record = trial ?? {
    from: '?',
    to: version,
    slot: booted.slot ?? 'A',
    startedAt: new Date().toISOString(),
    source: '?',
    status: /** @type {const} */ ('installed'),
  };
  const rollback = record.kind === 'rollback';
  if (failure === undefined) {
    const good = await markGood(deadline);
    if (!good.ok) failure = good.reason;
    else {
      rmSync(join(UPDATE_DIR, QUEUE_SNAPSHOT), { recursive: true, force: true });
      finishTrial({ ...record, status: 'good', finishedAt: new Date().toISOString() });
      const text = rollback
        ? `Went back to ${version} in slot ${booted.slot}: ready and confirmed (was ${record.from}).`
        : `${version} in slot ${booted.slot} is ready and confirmed (was ${record.from}).`;
      writeResult(text, BOOT_DIR);
      writeAtomic(UPDATE_ISSUE, `${text}\n\n`);
      audit('update_confirmed', 'ok', version, `ready in slot ${booted.slot} and kept (was ${record.from})`);
      refreshBanner();
      return 0;
    }
  }
  // The reason goes to the data partition first: the committed slot reports it after the reboot.
  writeTrialRecord({ ...record, status: 'failed', reason: failure, finishedAt: new Date().toISOString() });
  log(`the trial of ${version} failed: ${failure}; marking slot ${booted.slot} bad and rebooting into slot ${readBootState().slot}`);
  audit('update_confirmed', 'failed', version, `${failure}; rolling back to slot ${readBootState().slot}`);
  // The boot script spent the trial's attempt already: the next boot is the committed slot either way.
  rauc(['status', 'mark-bad'], true);
  run('systemctl', ['reboot']);
  return 1;
}
