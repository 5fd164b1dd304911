#!/usr/bin/node
// harbor-update: updates over the air into the other root slot, with RAUC.
//
//   harbor-update install FILE|URL [--force] [--no-reboot]
//       the entry point for every source: a bundle on the boot partition (harbor-update-file.service),
//       at the address the central tier serves (harbor-update-url.service), or uploaded by the local
//       console. The bundle's signature is checked against the keyring in the running slot before
//       anything is written; an older or the same release is refused unless --force.
//   harbor-update confirm      on a trial boot: marks the slot good once the gateway is ready on its
//                              queue and the local QuestDB answers, else records why and reboots
//                              into the committed slot (harbor-update-confirm.service; trial.mjs)
//   harbor-update report       at every boot, before the gateway: tells what became of the last
//                              update, on the screen, in harbor-update-result.txt on the boot
//                              partition and in the journal (harbor-update-report.service)
//   harbor-update handover     hands the readings of a queue file the running release cannot read
//                              to its gateway (harbor-update-handover.service; handover.mjs)
//   harbor-update rollback     goes back to the previous release, kept in the other slot (rollback.mjs);
//   harbor-update rollback-request  the same, asked by the local console (harbor-update-rollback.path)
//   harbor-update check-url    installs the bundle at UPDATE_URL when it changed (harbor-update-url.timer)
//   harbor-update install-boot-partition  installs the newest bundle copied to the boot partition
//   harbor-update install-upload  installs the bundle the local console received (harbor-update-upload.path),
//                              telling the console what became of it
//   harbor-update status       the slots, the running release and the last update's outcome, as JSON
//   harbor-update rauc-config  writes RAUC's system.conf for the card it runs on (rauc.service)
//
// What an update must never touch lives on the data partition (/var): the queue, QuestDB, the keys,
// certificates and settings. Every decision is written there first, so a power cut at any point
// leaves a board that boots a slot that was good, with its queue whole.
import { createWriteStream, existsSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { refreshBanner } from './banner.mjs';
import { INSTALLING, bootBundles, chooseBundle } from './boot-bundles.mjs';
import { BOOT_DIR, bootedSlot, readBootState } from './boot-state.mjs';
import { UPLOAD_BUNDLE, UPLOAD_DIR, takeRollbackRequest, writeVerdict } from './console-channel.mjs';
import { writeAtomic } from './files.mjs';
import { credentialFile } from './firstboot.mjs';
import { exportPending, loopbackIngest, runHandovers, setAsideAfterTrial, snapshotQueue } from './handover.mjs';
import { COMPATIBLE, rauc, verifiedManifest, writeRaucConfig } from './rauc.mjs';
import {
  RESULT_FILE,
  UPDATE_DIR,
  announce,
  audit,
  finishTrial,
  log,
  readJson,
  readLast,
  readTrial,
  releaseInfo,
  run,
  sourceName,
  warn,
  writeResult,
  writeTrialRecord,
} from './records.mjs';
import { previousOfThisBoard, rollBack } from './rollback.mjs';
import { confirm, trialSettings } from './trial.mjs';
import { versionDecision } from './versions.mjs';

/** Interrupted installs from the boot partition are tried again this often, then given up. */
const INSTALL_ATTEMPTS = 3;

/**
 * What became of a recorded trial, seen from the slot that booted. The committed slot running while
 * a trial was recorded means the trial failed: the record's reason when the trial wrote one, else
 * it never got that far.
 * @param {import('./records.mjs').Trial} trial
 * @param {{ booted: 'A' | 'B' | undefined, trialBoot: boolean }} now
 * @returns {'pending' | 'good' | 'failed' | 'interrupted'}
 */
export function trialOutcome(trial, now) {
  if (trial.status === 'good') return 'good';
  // The new slot runs: a power cut may have come after RAUC finished but before the record said so.
  if (now.booted === trial.slot) return now.trialBoot ? 'pending' : 'good';
  if (trial.status === 'installing') return 'interrupted';
  return 'failed';
}

/** The server has no bundle at the address (404): the central tier offers this site none yet. */
class NoBundle extends Error {}

/**
 * Downloads an address to the data partition (never to the slots), returning the file; undefined
 * when the server says it has not changed since the last download (its ETag). Errors name the
 * answer, not the address: the caller says which address it asked.
 */
async function download(/** @type {string} */ url, /** @type {{ conditional?: boolean, dir?: string }} */ options = {}) {
  const dir = options.dir ?? UPDATE_DIR;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const target = join(dir, 'download.raucb');
  const partial = `${target}.part`;
  const etagFile = join(dir, 'url-etag');
  const etag = options.conditional && existsSync(etagFile) ? readFileSync(etagFile, 'utf8').trim() : undefined;
  const response = await fetch(url, {
    headers: etag === undefined ? {} : { 'If-None-Match': etag },
    signal: AbortSignal.timeout(30 * 60_000),
  });
  if (response.status === 304) return undefined;
  if (response.status === 404) throw new NoBundle('no bundle there (404)');
  if (!response.ok || response.body === null) throw new Error(`the server answered ${response.status} ${response.statusText}`.trim());
  log(`downloading ${url}`);
  await pipeline(
    Readable.fromWeb(/** @type {import('node:stream/web').ReadableStream} */ (response.body)),
    createWriteStream(partial, { mode: 0o600 }),
  );
  renameSync(partial, target);
  const received = response.headers.get('etag');
  if (received !== null) writeAtomic(etagFile, received, 0o600);
  return target;
}

/** An error's message with its cause (fetch's "fetch failed" says why only there). */
const failureText = (/** @type {unknown} */ error) => {
  const { message, cause } = /** @type {Error} */ (error);
  return cause instanceof Error ? `${message}: ${cause.message}` : message;
};

/** The central tier's bundle for this site, installed when it changed and is newer. */
export async function checkUrl(/** @type {string | undefined} */ url = process.env['UPDATE_URL'], dir = UPDATE_DIR) {
  if (url === undefined || url === '') return 0;
  let bundle;
  try {
    bundle = await download(url, { conditional: true, dir });
  } catch (error) {
    // No bundle published is the central tier's normal state, not a failure of the board.
    if (error instanceof NoBundle) {
      log(`UPDATE_URL ${url}: ${error.message}; nothing to install`);
      return 0;
    }
    warn(`UPDATE_URL ${url}: ${failureText(error)}; trying again at the next check`);
    return 1;
  }
  if (bundle === undefined) {
    log(`${url}: no new bundle`);
    return 0;
  }
  try {
    return await installBundle({ source: url, bundle, force: false, reboot: true });
  } finally {
    rmSync(bundle, { force: true });
  }
}

/**
 * Installs a bundle into the other slot and (unless told not to) reboots into it on trial.
 * @param {{ source: string, force?: boolean, reboot?: boolean }} options
 * @returns {Promise<number>} exit status: 0 installed, 1 refused or failed
 */
export async function install({ source, force = false, reboot = true }) {
  let bundle = source;
  if (/^https?:\/\//.test(source)) {
    try {
      const downloaded = await download(source);
      if (downloaded === undefined) return refuse(source, 'the server sent no bundle');
      bundle = downloaded;
    } catch (error) {
      return refuse(source, `download failed: ${failureText(error)}`);
    }
  }
  try {
    return await installBundle({ source, bundle, force, reboot });
  } finally {
    // A download is kept only while it is installed; a refused one never stays on the card.
    if (bundle.startsWith(UPDATE_DIR)) rmSync(bundle, { force: true });
  }
}

/** @typedef {import('./console-channel.mjs').Verdict} Verdict */

/**
 * Why a bundle may not be installed now, whatever it holds; undefined when it may.
 * @returns {string | undefined}
 */
function busyReason() {
  if (bootedSlot().trial) return 'the board runs an update on trial; wait until it is confirmed or rolled back';
  const pending = readTrial();
  if (pending !== undefined && pending.status === 'installed') return `an update to ${pending.to} waits for its reboot`;
  return undefined;
}

/** @param {{ source: string, bundle: string, force: boolean, reboot: boolean, tell?: (verdict: Verdict) => void, manifest?: { version: string, compatible: string } }} options */
async function installBundle({ source, bundle, force, reboot, tell = () => {}, manifest: checked }) {
  const refused = (/** @type {string} */ reason) => {
    tell({ state: 'refused', message: `Refused, nothing was written: ${reason}.` });
    return refuse(source, reason);
  };
  const running = releaseInfo();
  const from = running['APPLIANCE_VERSION'] ?? '0.0.0';
  const booted = bootedSlot();
  const busy = busyReason();
  if (busy !== undefined) return refused(busy);
  if (!existsSync(bundle)) return refused('no such file');
  const manifest = checked ?? verifiedManifest(bundle);
  if ('problem' in manifest) return refused(manifest.problem);
  if (manifest.compatible !== COMPATIBLE) return refused(`the bundle is for ${manifest.compatible}, this board is ${COMPATIBLE}`);
  const decision = versionDecision(from, manifest.version, force);
  if (!decision.allowed) return refused(decision.reason);
  const target = booted.slot === 'B' ? 'A' : 'B';
  log(`installing ${manifest.version} into slot ${target} (${decision.reason}); signature verified`);
  tell({
    state: 'installing',
    message: `Signature verified: installing ${manifest.version} into slot ${target} (${decision.reason}). The board then restarts into it on trial and keeps it only once the gateway is ready; the outcome is in harbor-update-result.txt on the boot partition and on the board's screen.`,
  });
  // The readings a failed trial left are exported by the release in the slot about to be written.
  exportPending();
  /** @type {import('./records.mjs').Trial} */
  const trial = {
    from,
    to: manifest.version,
    slot: target,
    startedAt: new Date().toISOString(),
    source,
    status: 'installing',
    kind: 'update',
    fromQueueFormat: Number(running['QUEUE_FORMAT'] ?? 0) || undefined,
  };
  writeTrialRecord(trial);
  const installed = rauc(['install', bundle]);
  if (!installed.ok) {
    finishTrial({ ...trial, status: 'failed', reason: `rauc install failed: ${installed.stderr}`, finishedAt: new Date().toISOString() });
    log(`installation failed: ${installed.stderr}`);
    tell({ state: 'failed', message: `The installation failed: ${installed.stderr}` });
    audit(
      'update_installed',
      'failed',
      manifest.version,
      `into slot ${target} from ${sourceName(source)}: rauc install failed: ${installed.stderr}`,
    );
    return 1;
  }
  writeTrialRecord({ ...trial, status: 'installed' });
  log(
    `installed ${manifest.version} into slot ${target}; the next boot tries it, and falls back to slot ${booted.slot ?? '?'} unless it is confirmed`,
  );
  audit(
    'update_installed',
    'ok',
    manifest.version,
    `${decision.reason}, into slot ${target} from ${sourceName(source)}; tried at the next boot`,
  );
  if (reboot) run('systemctl', ['reboot']);
  return 0;
}

/** Records a refused bundle (nothing was written to a slot) and says why. */
function refuse(/** @type {string} */ source, /** @type {string} */ reason) {
  const now = new Date().toISOString();
  mkdirSync(UPDATE_DIR, { recursive: true, mode: 0o700 });
  writeAtomic(join(UPDATE_DIR, 'refused.json'), `${JSON.stringify({ source, reason, at: now }, null, 2)}\n`, 0o600);
  log(`refused ${source}: ${reason}`);
  audit('update_installed', 'refused', sourceName(source), reason);
  return 1;
}

/**
 * The bundle the local console received: moved out of the gateway's folder onto the update folder
 * (root's) before anything reads it, so the unprivileged gateway cannot change it while it is
 * checked; installed as any other; the verdict written back for the console to show.
 */
export async function installUpload(dir = UPLOAD_DIR) {
  const incoming = join(dir, UPLOAD_BUNDLE);
  if (!lexists(incoming)) return 0;
  const tell = (/** @type {Verdict} */ verdict) => writeVerdict(dir, verdict);
  mkdirSync(UPDATE_DIR, { recursive: true, mode: 0o700 });
  const bundle = join(UPDATE_DIR, 'upload.raucb');
  rmSync(bundle, { force: true });
  renameSync(incoming, bundle);
  try {
    if (!lstatSync(bundle).isFile()) {
      tell({ state: 'refused', message: 'Refused, nothing was written: the upload is not a file.' });
      return refuse('the console upload', 'not a file');
    }
    return await installBundle({ source: 'the console upload', bundle, force: false, reboot: true, tell });
  } finally {
    rmSync(bundle, { force: true });
  }
}

const lexists = (/** @type {string} */ path) => {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
};

/**
 * The bundles on the boot partition, under any name ending .raucb: the newest the board may install
 * is renamed while it installs, so that a power cut during the installation is seen at the next boot
 * and the installation tried again (at most INSTALL_ATTEMPTS times); every bundle is removed
 * afterwards, with the outcome, and why each other one was not taken, in harbor-update-result.txt
 * and on the screen.
 */
export async function installFromBootPartition(boot = BOOT_DIR) {
  const found = bootBundles(boot);
  /** @type {string[]} */
  const notes = [];
  let busy = found.interrupted;
  /** @type {{ version: string, compatible: string } | undefined} */
  let manifest;
  if (busy === undefined) {
    if (found.bundles.length === 0) return 0;
    const blocked = busyReason();
    if (blocked !== undefined) {
      warn(`${found.bundles.join(', ')} on the boot partition left for later: ${blocked}`);
      return 0;
    }
    const running = releaseInfo()['APPLIANCE_VERSION'] ?? '0.0.0';
    const looked = found.bundles.map((name) => ({ name, manifest: verifiedManifest(join(boot, name)) }));
    const { chosen, refused } = chooseBundle(looked, running);
    for (const { name, reason } of refused) {
      rmSync(join(boot, name), { force: true });
      notes.push(`${name} was not installed: ${reason}`);
      refuse(name, reason);
    }
    if (chosen === undefined) {
      announce(`No update was installed. ${notes.join('. ')}. Nothing was written to the system.`, boot);
      return 1;
    }
    // Said at once, on the screen and in the result file, in case the installation is cut short.
    if (notes.length > 0) announce(`${notes.join('. ')}. Installing ${chosen.name} (${chosen.version}).`, boot);
    const entry = looked.find((l) => l.name === chosen.name)?.manifest;
    if (entry !== undefined && !('problem' in entry)) manifest = entry;
    busy = `${chosen.name}${INSTALLING}`;
    renameSync(join(boot, chosen.name), join(boot, busy));
  }
  const name = busy.slice(0, -INSTALLING.length);
  const attemptsFile = join(UPDATE_DIR, 'boot-partition-attempts');
  const attempts = existsSync(attemptsFile) ? Number(readFileSync(attemptsFile, 'utf8')) + 1 : 1;
  mkdirSync(UPDATE_DIR, { recursive: true, mode: 0o700 });
  writeAtomic(attemptsFile, String(attempts), 0o600);
  const others = notes.length === 0 ? '' : ` ${notes.join('. ')}.`;
  if (attempts > INSTALL_ATTEMPTS) {
    rmSync(join(boot, busy));
    rmSync(attemptsFile);
    announce(`The update in ${name} was interrupted ${INSTALL_ATTEMPTS} times and given up. Copy it again to retry.${others}`, boot);
    audit('update_installed', 'failed', name, `interrupted ${INSTALL_ATTEMPTS} times and given up`);
    return 1;
  }
  const status = await installBundle({ source: join(boot, busy), bundle: join(boot, busy), force: false, reboot: false, manifest });
  rmSync(join(boot, busy), { force: true });
  rmSync(attemptsFile, { force: true });
  if (status !== 0) {
    const refused = readJson(join(UPDATE_DIR, 'refused.json'));
    const last = readLast();
    announce(
      `The update in ${name} was not installed: ${refused?.reason ?? last?.reason ?? 'see the journal'}. Nothing was written to the system.${others}`,
      boot,
    );
    return status;
  }
  const trial = readTrial();
  writeResult(
    `${trial?.to ?? 'The update'} (${name}) was installed into slot ${trial?.slot ?? '?'} and is being tried; this file will say whether it was kept.${others}`,
    boot,
  );
  run('systemctl', ['reboot']);
  return 0;
}

/** At every boot, before the gateway: what became of the last update, told once where it is seen. */
export function report() {
  const booted = bootedSlot();
  const trial = readTrial();
  if (trial === undefined) return 0;
  const outcome = trialOutcome(trial, { booted: booted.slot, trialBoot: booted.trial });
  const rollback = trial.kind === 'rollback';
  if (outcome === 'pending') {
    if (trial.status !== 'failed') {
      // The first boot of a trial: the queue as it was, in case the trial upgrades it and fails.
      const format = Number(releaseInfo()['QUEUE_FORMAT'] ?? 0);
      if (format > 0 && snapshotQueue({ releaseFormat: format }))
        log('queue copied before the trial opens it (its format is older than this release writes)');
    }
    return 0;
  }
  if (outcome === 'interrupted') {
    // Power was cut while RAUC wrote the slot, or while the queue was handed over before going back:
    // the committed slot booted. A queue set aside meanwhile is handed back to it.
    const text = rollback
      ? `Going back to ${trial.to} was interrupted; ${trial.from} keeps running from slot ${booted.slot}.`
      : `Update to ${trial.to} was interrupted during installation; ${trial.from} keeps running from slot ${booted.slot}.`;
    finishTrial({
      ...trial,
      status: 'failed',
      reason: rollback
        ? 'interrupted before the restart'
        : 'the installation was interrupted (power cut or restart); the slot was left unused',
      finishedAt: new Date().toISOString(),
    });
    announce(text);
    audit(
      'update_rolled_back',
      rollback ? 'failed' : 'ok',
      trial.to,
      rollback
        ? `going back was interrupted before the restart; ${trial.from} runs on from slot ${booted.slot}`
        : `the installation was interrupted; ${trial.from} runs from slot ${booted.slot}`,
    );
    return 0;
  }
  if (outcome === 'good') {
    finishTrial({ ...trial, status: 'good', finishedAt: trial.finishedAt ?? new Date().toISOString() });
    return 0;
  }
  const setAside = setAsideAfterTrial({ trial });
  const reason =
    trial.status === 'failed' && trial.reason
      ? trial.reason
      : 'the trial boot never confirmed the new release (it did not start, hung, lost power or was reset by the watchdog)';
  const handedOver =
    setAside === undefined
      ? ''
      : ` ${capitalised(setAside.text)}; the readings the trial took are handed to ${trial.from} once its gateway is ready.`;
  const text = rollback
    ? `Going back to ${trial.to} failed; ${trial.from} runs from slot ${booted.slot} again. Why: ${reason}.${handedOver}`
    : `Update to ${trial.to} failed and was rolled back; ${trial.from} runs from slot ${booted.slot}. Why: ${reason}.${handedOver}`;
  finishTrial({ ...trial, status: 'failed', reason, finishedAt: trial.finishedAt ?? new Date().toISOString() });
  announce(text);
  audit(
    'update_rolled_back',
    rollback ? 'failed' : 'ok',
    trial.to,
    `${trial.from} runs from slot ${booted.slot}; ${reason}${setAside === undefined ? '' : '; the readings the trial took are handed over'}`,
  );
  return 0;
}

const capitalised = (/** @type {string} */ text) => `${text.charAt(0).toUpperCase()}${text.slice(1)}`;

/** After the gateway: the readings of queue files this release cannot read, handed to it; the outcome added to the report. */
export async function handover() {
  const settings = trialSettings();
  const apiKey = readFileSync(`/${credentialFile('api_key')}`, 'utf8').trim();
  const told = await runHandovers({ ingest: loopbackIngest({ port: settings.port, apiKey }) });
  if (told.length === 0) return 0;
  const current = existsSync(join(BOOT_DIR, RESULT_FILE))
    ? readFileSync(join(BOOT_DIR, RESULT_FILE), 'utf8').trim().replace(/^\S+ /, '')
    : '';
  announce(`${current === '' ? '' : `${current} `}${told.join(' ')}`);
  withUmask(refreshBanner);
  return 0;
}

/** The slots and the last update, for the console and the technician. */
export function status() {
  const state = readBootState();
  const booted = bootedSlot();
  return {
    release: releaseInfo(),
    booted: booted.slot ?? null,
    trialBoot: booted.trial,
    committed: state.slot,
    trial: state.trySlot === undefined ? null : { slot: state.trySlot, attemptsLeft: state.tryLeft },
    pending: readTrial() ?? null,
    last: readLast() ?? null,
    previous: previousOfThisBoard(),
    refused: readJson(join(UPDATE_DIR, 'refused.json')) ?? null,
  };
}

async function main() {
  const [command, ...args] = process.argv.slice(2);
  process.umask(0o077);
  switch (command) {
    case 'install': {
      const source = args.find((arg) => !arg.startsWith('--'));
      if (source === undefined) throw new Error('install needs a bundle file or an http(s) address');
      return install({
        source: /^https?:\/\//.test(source) ? source : resolve(source),
        force: args.includes('--force'),
        reboot: !args.includes('--no-reboot'),
      });
    }
    case 'install-boot-partition':
      return installFromBootPartition();
    case 'confirm':
      return confirm({ refreshBanner: () => withUmask(refreshBanner) });
    case 'check-url':
      return checkUrl();
    case 'install-upload':
      return installUpload();
    case 'report':
      return report();
    case 'handover':
      return handover();
    case 'rollback':
      return rollBack({ source: 'harbor-update rollback', tell: (verdict) => log(verdict.message), pauseMs: 0 });
    case 'rollback-request': {
      const request = takeRollbackRequest();
      if (request === undefined) return 0;
      return rollBack({ to: request.to, source: 'the local console', tell: (verdict) => writeVerdict(UPLOAD_DIR, verdict) });
    }
    case 'status':
      process.stdout.write(`${JSON.stringify(status(), null, 2)}\n`);
      return 0;
    case 'rauc-config':
      writeRaucConfig();
      return 0;
    default:
      process.stderr.write(
        'usage: harbor-update install FILE|URL [--force] [--no-reboot] | confirm | report | handover | rollback | status | check-url | install-boot-partition | install-upload | rollback-request | rauc-config\n',
      );
      return 64;
  }
}

/** Files read by others (the screen's text, the console's view of the releases) are written world-readable. */
function withUmask(/** @type {() => void} */ write) {
  const umask = process.umask(0o022);
  try {
    write();
  } catch (error) {
    warn(`the screen's text was not written: ${/** @type {Error} */ (error).message}`);
  } finally {
    process.umask(umask);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      log(`failed: ${/** @type {Error} */ (error).message}`);
      process.exitCode = 2;
    },
  );
}
