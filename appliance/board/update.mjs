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
//                              into the committed slot (harbor-update-confirm.service)
//   harbor-update report       at every boot, before the gateway: tells what became of the last
//                              update, on the console, in harbor-update-result.txt on the boot
//                              partition and in the journal (harbor-update-report.service)
//   harbor-update check-url    installs the bundle at UPDATE_URL when it changed (harbor-update-url.timer)
//   harbor-update install-upload  installs the bundle the local console received (harbor-update-upload.path),
//                              telling the console what became of it
//   harbor-update status       the slots, the running release and the last update's outcome, as JSON
//   harbor-update rauc-config  writes RAUC's system.conf for the card it runs on (rauc.service)
//
// What an update must never touch lives on the data partition (/var): the queue, QuestDB, the keys,
// certificates and settings. Every decision is written there first, so a power cut at any point
// leaves a board that boots a slot that was good, with its queue whole.
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  constants,
  copyFileSync,
  createWriteStream,
  existsSync,
  fchownSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { gatewayRun, recordAudit } from './audit.mjs';
import { BOOT_DIR, bootedSlot, readBootState } from './boot-state.mjs';
import { readBytes, syncDirectory, syncFile, writeAtomic } from './files.mjs';
import { UPDATE_ENV, credentialFile } from './firstboot.mjs';
import { parseEnvText } from './settings.mjs';
import { unitEnvironment } from './unit.mjs';

/** Where an update keeps its record (the data partition, shared by both slots). */
export const UPDATE_DIR = '/var/lib/harbor-appliance/update';
export const RELEASE_FILE = '/etc/harbor-appliance-release';
export const RAUC_CONF = '/run/harbor-appliance/rauc/system.conf';
export const KEYRING = '/etc/rauc/keyring.pem';
export const COMPATIBLE = 'harbor-gateway-arm64';
/** The bundle a technician copies to the boot partition. */
export const BOOT_BUNDLE = 'harbor-update.raucb';
export const RESULT_FILE = 'harbor-update-result.txt';
export const ISSUE = '/run/issue.d/60-harbor-update.issue';
const GATEWAY_STATE = '/var/lib/private/harbor-gateway';
/**
 * The local console's upload folder in the gateway's state directory, and the files the console
 * and this program exchange there (src/console/update-bundle.ts): the gateway, which runs
 * unprivileged, renames a complete upload to UPLOAD_BUNDLE; harbor-update-upload.path starts
 * `install-upload`, which takes the file out of the gateway's reach and answers in UPLOAD_VERDICT.
 */
export const UPLOAD_DIR = `${GATEWAY_STATE}/update-upload`;
export const UPLOAD_BUNDLE = 'bundle.raucb';
export const UPLOAD_VERDICT = 'result.json';
const QUEUE_SNAPSHOT = 'queue-before-trial';
/**
 * How long a trial may take to be ready. QuestDB's first start on a new slot took about 420 s on a
 * loaded emulated board (a minute or two on a Raspberry Pi): twice that, since a good release rolled
 * back by a short limit costs the site its update, while a long one only delays the return from a
 * release that hangs (one whose gateway fails is given up at once).
 */
const DEFAULT_TRIAL_SECONDS = 900;
/** Interrupted installs from the boot partition are tried again this often, then given up. */
const INSTALL_ATTEMPTS = 3;

/**
 * Orders versions as semantic versioning does: X.Y.Z, then a release after its pre-releases
 * (0.5.0-dev.41 < 0.5.0), pre-release fields numerically where numeric; build metadata (+...) is
 * ignored. Negative when a is older than b.
 */
export function compareVersions(/** @type {string} */ a, /** @type {string} */ b) {
  const parse = (/** @type {string} */ v) => {
    const [core = '', pre] = v.split('+')[0]?.split(/-(.*)/s) ?? [];
    return { core: core.split('.').map((n) => Number.parseInt(n, 10) || 0), pre: pre === undefined || pre === '' ? [] : pre.split('.') };
  };
  const [x, y] = [parse(a), parse(b)];
  for (let i = 0; i < 3; i++) if ((x.core[i] ?? 0) !== (y.core[i] ?? 0)) return (x.core[i] ?? 0) - (y.core[i] ?? 0);
  if (x.pre.length === 0 || y.pre.length === 0) return y.pre.length - x.pre.length;
  for (let i = 0; i < Math.max(x.pre.length, y.pre.length); i++) {
    const [p, q] = [x.pre[i], y.pre[i]];
    if (p === undefined || q === undefined) return p === undefined ? -1 : 1;
    if (p === q) continue;
    const [m, n] = [/^\d+$/.test(p) ? Number(p) : undefined, /^\d+$/.test(q) ? Number(q) : undefined];
    if (m !== undefined && n !== undefined) return m - n;
    if (m !== undefined || n !== undefined) return m !== undefined ? -1 : 1;
    return p < q ? -1 : 1;
  }
  return 0;
}

/** Whether a bundle of `incoming` may replace `running`: a newer release, or anything when forced. */
export function versionDecision(/** @type {string} */ running, /** @type {string} */ incoming, force = false) {
  const order = compareVersions(incoming, running);
  if (order > 0) return { allowed: true, reason: `${running} -> ${incoming}` };
  const what = order === 0 ? `${incoming} is the release this board runs` : `${incoming} is older than ${running} (a downgrade)`;
  return force ? { allowed: true, reason: `${what}; forced` } : { allowed: false, reason: `${what}; refused without --force` };
}

/** KEY=value lines of /etc/harbor-appliance-release. */
export function releaseInfo(root = '/') {
  /** @type {Record<string, string>} */
  const info = {};
  const path = join(root, RELEASE_FILE);
  if (!existsSync(path)) return info;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const at = line.indexOf('=');
    if (at > 0) info[line.slice(0, at)] = line.slice(at + 1);
  }
  return info;
}

/** The queue file's format: SQLite's user_version, bytes 60-63 of the header; undefined without a file. */
export function queueFormatOf(/** @type {string} */ path) {
  if (!existsSync(path) || statSync(path).size < 100) return undefined;
  return readBytes(path, 4, 60).readUInt32BE(0);
}

const QUEUE_FILES = ['queue.db', 'queue.db-wal'];

/**
 * Before a trial's gateway opens the queue for the first time: when the new release would upgrade
 * the file's format, keep a copy of it, so that a failed trial gives the old release back a file
 * it can open (the gateway never changes a file newer than its release). Root runs this with the
 * gateway stopped, so the file and its WAL are copied as one state.
 * @param {{ stateDir?: string, updateDir?: string, releaseFormat: number }} options
 */
export function snapshotQueue({ stateDir = GATEWAY_STATE, updateDir = UPDATE_DIR, releaseFormat }) {
  const format = queueFormatOf(join(stateDir, 'queue.db'));
  const target = join(updateDir, QUEUE_SNAPSHOT);
  if (format === undefined || format >= releaseFormat || existsSync(join(target, 'queue.db'))) return false;
  const partial = `${target}.part`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true, mode: 0o700 });
  for (const name of QUEUE_FILES) if (existsSync(join(stateDir, name))) copyFileSync(join(stateDir, name), join(partial, name));
  syncTree(partial);
  renameSync(partial, target);
  return true;
}

/**
 * After a failed trial, on the committed slot, before its gateway starts: when the trial upgraded
 * the queue's format, its file is set aside untouched (readings the trial accepted stay in it) and
 * the copy taken before the trial is put back. Returns what was done, for the report.
 * @param {{ stateDir?: string, updateDir?: string, now?: Date }} options
 */
export function restoreQueue({ stateDir = GATEWAY_STATE, updateDir = UPDATE_DIR, now = new Date() }) {
  const snapshot = join(updateDir, QUEUE_SNAPSHOT);
  if (!existsSync(join(snapshot, 'queue.db'))) return undefined;
  const before = queueFormatOf(join(snapshot, 'queue.db'));
  const after = queueFormatOf(join(stateDir, 'queue.db'));
  if (before === undefined || after === undefined || after <= before) {
    rmSync(snapshot, { recursive: true, force: true });
    return undefined;
  }
  const aside = join(stateDir, `queue-format-${after}-set-aside-${now.toISOString().replace(/[:.]/g, '-')}`);
  mkdirSync(aside, { recursive: true, mode: 0o700 });
  for (const name of [...QUEUE_FILES, 'queue.db-shm'])
    if (existsSync(join(stateDir, name))) renameSync(join(stateDir, name), join(aside, name));
  for (const name of QUEUE_FILES) if (existsSync(join(snapshot, name))) copyFileSync(join(snapshot, name), join(stateDir, name));
  syncTree(stateDir);
  syncTree(aside);
  rmSync(snapshot, { recursive: true, force: true });
  return `the trial had upgraded the queue to format ${after}; that file is kept in ${aside} and the format-${before} queue from before the trial was restored`;
}

/** The files of a folder and the folder itself on disk, before anything relies on them. */
function syncTree(/** @type {string} */ dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isFile()) syncFile(path);
  }
  syncDirectory(dir);
}

/**
 * @typedef {object} Trial
 * @property {string} from        release the board ran
 * @property {string} to          release installed
 * @property {'A' | 'B'} slot     slot written
 * @property {string} startedAt
 * @property {string} source      file or address of the bundle
 * @property {'installing' | 'installed' | 'good' | 'failed' | 'refused'} status
 * @property {string} [reason]
 * @property {string} [finishedAt]
 */

const trialPath = (/** @type {string} */ dir) => join(dir, 'trial.json');
const lastPath = (/** @type {string} */ dir) => join(dir, 'last.json');

/** @returns {Trial | undefined} */
export function readTrial(dir = UPDATE_DIR) {
  try {
    return JSON.parse(readFileSync(trialPath(dir), 'utf8'));
  } catch {
    return undefined;
  }
}

export function writeTrialRecord(/** @type {Trial} */ trial, dir = UPDATE_DIR) {
  writeAtomic(trialPath(dir), `${JSON.stringify(trial, null, 2)}\n`, 0o600);
}

/** Ends the record of an update: it moves to last.json, the report's and `status`'s source. */
export function finishTrial(/** @type {Trial} */ trial, dir = UPDATE_DIR) {
  writeAtomic(lastPath(dir), `${JSON.stringify(trial, null, 2)}\n`, 0o600);
  rmSync(trialPath(dir), { force: true });
}

/** @returns {Trial | undefined} */
export function readLast(dir = UPDATE_DIR) {
  try {
    return JSON.parse(readFileSync(lastPath(dir), 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * What became of a recorded trial, seen from the slot that booted. The committed slot running while
 * a trial was recorded means the trial failed: the record's reason when the trial wrote one, else
 * it never got that far.
 * @param {Trial} trial
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

/**
 * Writes RAUC's system.conf for this card: its slots are partitions 2 and 3 of the disk the running
 * root is on, named by PARTUUID (the card's own disk id, which an update never changes).
 */
export function raucConfig(cmdline = readFileSync('/proc/cmdline', 'utf8')) {
  const root = /(?:^|\s)root=PARTUUID=([0-9a-fA-F]{8})-0[23](?:\s|$)/.exec(cmdline);
  if (root === null) throw new Error('the kernel command line has no root=PARTUUID=<disk>-02|03: not booted by the appliance boot script');
  const disk = String(root[1]).toLowerCase();
  return [
    '# Written at each start of rauc.service by harbor-update rauc-config, for the card it runs on.',
    '[system]',
    `compatible=${COMPATIBLE}`,
    'bootloader=custom',
    // Only dm-verity bundles: the payload is checked block by block as it is read.
    'bundle-formats=-plain',
    'data-directory=/var/lib/rauc',
    '',
    '[handlers]',
    'bootloader-custom-backend=/usr/lib/harbor-appliance/boot-state.mjs',
    '',
    '[keyring]',
    `path=${KEYRING}`,
    '',
    '[slot.rootfs.0]',
    `device=/dev/disk/by-partuuid/${disk}-02`,
    'type=ext4',
    'bootname=A',
    '',
    '[slot.rootfs.1]',
    `device=/dev/disk/by-partuuid/${disk}-03`,
    'type=ext4',
    'bootname=B',
    '',
  ].join('\n');
}

const log = (/** @type {string} */ message) => process.stdout.write(`harbor-update: ${message}\n`);

/**
 * Where a bundle came from, for the audit trail: an address without its user, password or query
 * (a token there is a secret), or the file's name.
 */
export function sourceName(/** @type {string} */ source) {
  if (!/^https?:\/\//.test(source)) return source.split('/').at(-1) ?? source;
  try {
    const url = new URL(source);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return 'an address';
  }
}

/**
 * One entry of harbor-update in the gateway's audit trail, written by the gateway's own command.
 * @param {'update_installed' | 'update_confirmed' | 'update_rolled_back'} action
 * @param {'ok' | 'refused' | 'failed'} outcome
 * @param {string} subject
 * @param {string} detail
 */
function audit(action, outcome, subject, detail) {
  try {
    const { program, env } = gatewayRun('/');
    recordAudit([{ action, outcome, actor: 'harbor-update', subject, detail }], { command: [...program, 'audit', 'record'], env, log });
  } catch (error) {
    log(`not in the audit trail (${action} ${outcome}): ${/** @type {Error} */ (error).message}`);
  }
}
/** A line the journal keeps at warning priority (systemd reads the <4> prefix on a service's output). */
const warn = (/** @type {string} */ message) =>
  process.stdout.write(`${process.env['JOURNAL_STREAM'] ? '<4>' : ''}harbor-update: ${message}\n`);

/**
 * @param {string} command
 * @param {string[]} args
 * @param {{ quiet?: boolean }} [options]
 */
function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', stdio: options.quiet ? 'pipe' : ['ignore', 'inherit', 'pipe'] });
  return { ok: result.status === 0, stdout: result.stdout ?? '', stderr: (result.stderr ?? '').trim(), status: result.status };
}

/** RAUC with this card's configuration, written first when rauc.service has not run yet this boot. */
const rauc = (/** @type {string[]} */ args, quiet = false) => {
  if (!existsSync(RAUC_CONF)) writeRaucConfig();
  return run('rauc', [`--conf=${RAUC_CONF}`, ...args], { quiet });
};

function writeRaucConfig() {
  const umask = process.umask(0o022);
  try {
    writeAtomic(RAUC_CONF, raucConfig());
  } finally {
    process.umask(umask);
  }
}

/**
 * The bundle's manifest after RAUC has checked its signature against the keyring, or why not.
 * @returns {{ version: string, compatible: string } | { problem: string }}
 */
function verifiedManifest(/** @type {string} */ bundle) {
  const info = rauc(['info', '--output-format=json', bundle], true);
  if (!info.ok) return { problem: `the bundle's signature or format was refused: ${info.stderr.split('\n').slice(-3).join(' ')}` };
  const manifest = JSON.parse(info.stdout);
  return { version: String(manifest.version ?? ''), compatible: String(manifest.compatible ?? '') };
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

/**
 * What became of a bundle, for whoever handed it over and waits (the console): refused (nothing
 * written), being installed, or failed while it was written.
 * @typedef {{ state: 'refused' | 'installing' | 'failed', message: string }} Verdict
 */

/** @param {{ source: string, bundle: string, force: boolean, reboot: boolean, tell?: (verdict: Verdict) => void }} options */
async function installBundle({ source, bundle, force, reboot, tell = () => {} }) {
  const refused = (/** @type {string} */ reason) => {
    tell({ state: 'refused', message: `Refused, nothing was written: ${reason}.` });
    return refuse(source, reason);
  };
  const from = releaseInfo()['APPLIANCE_VERSION'] ?? '0.0.0';
  const booted = bootedSlot();
  if (booted.trial) return refused('the board runs an update on trial; wait until it is confirmed or rolled back');
  const pending = readTrial();
  if (pending !== undefined && pending.status === 'installed') return refused(`an update to ${pending.to} waits for its reboot`);
  if (!existsSync(bundle)) return refused('no such file');
  const manifest = verifiedManifest(bundle);
  if ('problem' in manifest) return refused(manifest.problem);
  if (manifest.compatible !== COMPATIBLE) return refused(`the bundle is for ${manifest.compatible}, this board is ${COMPATIBLE}`);
  const decision = versionDecision(from, manifest.version, force);
  if (!decision.allowed) return refused(decision.reason);
  const target = booted.slot === 'B' ? 'A' : 'B';
  log(`installing ${manifest.version} into slot ${target} (${decision.reason}); signature verified`);
  tell({
    state: 'installing',
    message: `Signature verified: installing ${manifest.version} into slot ${target} (${decision.reason}). The board then restarts into it on trial and keeps it only once the gateway is ready; the outcome is in harbor-update-result.txt on the boot partition.`,
  });
  /** @type {Trial} */
  const trial = { from, to: manifest.version, slot: target, startedAt: new Date().toISOString(), source, status: 'installing' };
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
 * The verdict in the gateway's folder, readable by the gateway's user. The folder is that user's:
 * the file is created new (never through a link it left there), given to the folder's owner and
 * renamed into place.
 * @param {string} dir
 * @param {Verdict} verdict
 */
export function writeVerdict(dir, verdict) {
  const owner = lstatSync(dir);
  if (!owner.isDirectory()) throw new Error(`${dir} is not a folder`);
  const temporary = join(dir, `.${UPLOAD_VERDICT}.${process.pid}`);
  rmSync(temporary, { force: true });
  const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, `${JSON.stringify({ ...verdict, at: new Date().toISOString() })}\n`);
    fchownSync(fd, owner.uid, owner.gid);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, join(dir, UPLOAD_VERDICT));
}

/**
 * The bundle on the boot partition: renamed while it installs, so that a power cut during the
 * installation is seen at the next boot and the installation tried again (at most
 * INSTALL_ATTEMPTS times); removed afterwards, with the outcome in harbor-update-result.txt.
 */
export async function installFromBootPartition(boot = BOOT_DIR) {
  const file = join(boot, BOOT_BUNDLE);
  const busy = `${file}.installing`;
  if (existsSync(file)) renameSync(file, busy);
  if (!existsSync(busy)) return 0;
  const attemptsFile = join(UPDATE_DIR, 'boot-partition-attempts');
  const attempts = existsSync(attemptsFile) ? Number(readFileSync(attemptsFile, 'utf8')) + 1 : 1;
  mkdirSync(UPDATE_DIR, { recursive: true, mode: 0o700 });
  writeAtomic(attemptsFile, String(attempts), 0o600);
  if (attempts > INSTALL_ATTEMPTS) {
    rmSync(busy);
    rmSync(attemptsFile);
    writeResult(boot, `The update in ${BOOT_BUNDLE} was interrupted ${INSTALL_ATTEMPTS} times and given up. Copy it again to retry.`);
    audit('update_installed', 'failed', BOOT_BUNDLE, `interrupted ${INSTALL_ATTEMPTS} times and given up`);
    return 1;
  }
  const status = await install({ source: busy, reboot: false });
  rmSync(busy, { force: true });
  rmSync(attemptsFile, { force: true });
  if (status !== 0) {
    const refused = readJson(join(UPDATE_DIR, 'refused.json'));
    const last = readLast();
    writeResult(
      boot,
      `The update in ${BOOT_BUNDLE} was not installed: ${refused?.reason ?? last?.reason ?? 'see the journal'}. Nothing was written to the system.`,
    );
    return status;
  }
  const trial = readTrial();
  writeResult(
    boot,
    `${trial?.to ?? 'The update'} was installed into slot ${trial?.slot ?? '?'} and is being tried; this file will say whether it was kept.`,
  );
  run('systemctl', ['reboot']);
  return 0;
}

function readJson(/** @type {string} */ path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

function writeResult(/** @type {string} */ boot, /** @type {string} */ text) {
  writeAtomic(join(boot, RESULT_FILE), `${new Date().toISOString()} ${text}\r\n`);
  log(text);
}

/**
 * Why the gateway's unit, as `systemctl show` describes it, has failed a trial; undefined while it
 * has not. A gateway that exits is restarted by its unit (Restart=on-failure) and may never stay
 * failed: seen between restarts only for the 2 s of RestartSec, after which its result and exit
 * status read success again. Any restart on a trial is a failed release.
 * @param {Record<string, string>} unit
 */
export function gatewayUnitFailure(unit) {
  const restarts = Number(unit['NRestarts'] ?? 0);
  const exited = unit['Result'] !== undefined && unit['Result'] !== 'success';
  const how = exited ? ` (${unit['Result']}, exit status ${unit['ExecMainStatus']})` : '';
  if (restarts > 0)
    return `harbor-gateway.service exited and was restarted ${restarts === 1 ? 'once' : `${restarts} times`}, now ${unit['ActiveState']}${how}`;
  if (unit['ActiveState'] === 'failed' || (exited && unit['ActiveState'] !== 'active'))
    return `harbor-gateway.service ${unit['ActiveState']}${how}`;
  return undefined;
}

/** The conditions of a good trial, as one pass over the running system. */
async function trialChecks(/** @type {{ port: string, questdb: boolean }} */ expected) {
  /** @type {string[]} */
  const waiting = [];
  const unit = run(
    'systemctl',
    ['show', 'harbor-gateway.service', '--property=ActiveState,SubState,Result,ExecMainStatus,NRestarts,StatusText'],
    { quiet: true },
  );
  const props = Object.fromEntries(
    unit.stdout
      .trim()
      .split('\n')
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
  const failure = gatewayUnitFailure(props);
  if (failure !== undefined) return { failed: `${failure}${gatewayJournal()}` };
  if (props['ActiveState'] !== 'active') waiting.push(`harbor-gateway.service is ${props['ActiveState']}/${props['SubState']}`);
  try {
    const ready = await fetch(`http://127.0.0.1:${expected.port}/readyz`, { signal: AbortSignal.timeout(5000) });
    if (!ready.ok) waiting.push(`the gateway is not ready: ${await ready.text()}`);
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

function gatewayJournal() {
  const journal = run('journalctl', ['--unit=harbor-gateway.service', '--boot', '--lines=6', '--output=cat', '--no-pager'], {
    quiet: true,
  });
  const lines = journal.stdout.trim();
  return lines === '' ? '' : `; its last log lines: ${lines.split('\n').join(' | ').slice(-1500)}`;
}

/** What the checks need: the gateway's port, whether a local QuestDB is on, the trial's time limit. */
function trialSettings() {
  const read = (/** @type {string} */ path) => (existsSync(path) ? parseEnvText(readFileSync(path, 'utf8')) : {});
  const gateway = read('/etc/harbor-gateway/gateway.env');
  const update = read(`/${UPDATE_ENV}`);
  return {
    port: gateway['PORT'] ?? '8000',
    questdb: (gateway['LOCAL_QUESTDB'] ?? 'on') !== 'off',
    trialSeconds: Number(update['UPDATE_TRIAL_SECONDS'] ?? DEFAULT_TRIAL_SECONDS),
  };
}

/** On a trial boot: confirm the slot or give it up, and say which and why. */
export async function confirm() {
  const booted = bootedSlot();
  const trial = readTrial();
  if (!booted.trial) return 0;
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
  for (;;) {
    const checks = await trialChecks({ port: settings.port, questdb: settings.questdb });
    if ('failed' in checks) {
      failure = checks.failed;
      break;
    }
    waiting = checks.waiting;
    if (waiting.length === 0) break;
    if (Date.now() > deadline) {
      failure = `not ready within ${settings.trialSeconds} s: ${waiting.join('; ')}`;
      break;
    }
    await new Promise((r) => setTimeout(r, 3000));
  }
  const record = trial ?? {
    from: '?',
    to: version,
    slot: booted.slot ?? 'A',
    startedAt: new Date().toISOString(),
    source: '?',
    status: 'installed',
  };
  if (failure === undefined) {
    const good = rauc(['status', 'mark-good'], true);
    if (!good.ok) failure = `RAUC could not mark the slot good: ${good.stderr}`;
    else {
      rmSync(join(UPDATE_DIR, QUEUE_SNAPSHOT), { recursive: true, force: true });
      finishTrial({ ...record, status: 'good', finishedAt: new Date().toISOString() });
      writeResult(BOOT_DIR, `${version} in slot ${booted.slot} is ready and confirmed (was ${record.from}).`);
      writeAtomic(ISSUE, `Update: ${version} confirmed in slot ${booted.slot} (was ${record.from}).\n\n`);
      audit('update_confirmed', 'ok', version, `ready in slot ${booted.slot} and kept (was ${record.from})`);
      return 0;
    }
  }
  // The reason goes to the data partition first: the committed slot reports it after the reboot.
  writeTrialRecord({ ...record, status: 'failed', reason: failure, finishedAt: new Date().toISOString() });
  log(`the trial of ${version} failed: ${failure}; marking slot ${booted.slot} bad and rebooting into slot ${readBootState().slot}`);
  audit('update_confirmed', 'failed', version, `${failure}; rolling back to slot ${readBootState().slot}`);
  rauc(['status', 'mark-bad'], true);
  run('systemctl', ['reboot']);
  return 1;
}

/** At every boot, before the gateway: what became of the last update, told once where it is seen. */
export function report() {
  const booted = bootedSlot();
  const trial = readTrial();
  if (trial === undefined) return 0;
  const outcome = trialOutcome(trial, { booted: booted.slot, trialBoot: booted.trial });
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
    // Power was cut while RAUC wrote the slot: it was marked bad first, so the committed slot booted.
    finishTrial({
      ...trial,
      status: 'failed',
      reason: 'the installation was interrupted (power cut or restart); the slot was left unused',
      finishedAt: new Date().toISOString(),
    });
    announce(`Update to ${trial.to} was interrupted during installation; ${trial.from} keeps running from slot ${booted.slot}.`);
    audit('update_rolled_back', 'ok', trial.to, `the installation was interrupted; ${trial.from} runs from slot ${booted.slot}`);
    return 0;
  }
  if (outcome === 'good') {
    finishTrial({ ...trial, status: 'good', finishedAt: trial.finishedAt ?? new Date().toISOString() });
    return 0;
  }
  const restored = restoreQueue({});
  const reason =
    trial.status === 'failed' && trial.reason
      ? trial.reason
      : 'the trial boot never confirmed the new release (it did not start, hung, lost power or was reset by the watchdog)';
  finishTrial({
    ...trial,
    status: 'failed',
    reason: restored ? `${reason}; ${restored}` : reason,
    finishedAt: trial.finishedAt ?? new Date().toISOString(),
  });
  announce(
    `Update to ${trial.to} failed and was rolled back; ${trial.from} runs from slot ${booted.slot}. Why: ${reason}${restored ? `. ${restored}` : ''}`,
  );
  audit('update_rolled_back', 'ok', trial.to, `${trial.from} runs from slot ${booted.slot}; ${reason}${restored ? `; ${restored}` : ''}`);
  return 0;
}

function announce(/** @type {string} */ text) {
  writeResult(BOOT_DIR, text);
  writeAtomic(ISSUE, `${text}\n\n`);
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
      return confirm();
    case 'check-url':
      return checkUrl();
    case 'install-upload':
      return installUpload();
    case 'report':
      return report();
    case 'status':
      process.stdout.write(`${JSON.stringify(status(), null, 2)}\n`);
      return 0;
    case 'rauc-config':
      writeRaucConfig();
      return 0;
    default:
      process.stderr.write(
        `usage: harbor-update install FILE|URL [--force] [--no-reboot] | confirm | report | status | check-url | install-upload | rauc-config\n`,
      );
      return 64;
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
