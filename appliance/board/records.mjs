// What the board's updater keeps and tells: the record of an update on the data partition (shared by
// both slots, so the slot that boots next reads what the last one decided), the release a slot
// holds, and the places an outcome is told: the journal, the screen, harbor-update-result.txt, the
// gateway's audit trail.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { gatewayRun, recordAudit } from './audit.mjs';
import { BOOT_DIR } from './boot-state.mjs';
import { writeAtomic } from './files.mjs';

/** Where an update keeps its record (the data partition, shared by both slots). */
export const UPDATE_DIR = '/var/lib/harbor-appliance/update';
export const RELEASE_FILE = '/etc/harbor-appliance-release';
export const RESULT_FILE = 'harbor-update-result.txt';
/** The last update's outcome on the screen, until the next boot. */
export const UPDATE_ISSUE = '/run/issue.d/60-harbor-update.issue';
/** The gateway's state folder as root sees it (the service sees /var/lib/harbor-gateway). */
export const GATEWAY_STATE = '/var/lib/private/harbor-gateway';

/**
 * @typedef {object} Trial
 * @property {string} from        release the board ran
 * @property {string} to          release installed, or gone back to
 * @property {'A' | 'B'} slot     slot that holds `to`
 * @property {string} startedAt
 * @property {string} source      file or address of the bundle, or who asked to go back
 * @property {'installing' | 'installed' | 'good' | 'failed' | 'refused'} status
 * @property {'update' | 'rollback'} [kind]  rollback: back to the release the other slot kept
 * @property {number} [fromQueueFormat]  the queue format `from` writes
 * @property {string} [reason]
 * @property {string} [finishedAt]
 */

const trialPath = (/** @type {string} */ dir) => join(dir, 'trial.json');
const lastPath = (/** @type {string} */ dir) => join(dir, 'last.json');

export function readJson(/** @type {string} */ path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

/** @returns {Trial | undefined} */
export const readTrial = (dir = UPDATE_DIR) => readJson(trialPath(dir));

export function writeTrialRecord(/** @type {Trial} */ trial, dir = UPDATE_DIR) {
  writeAtomic(trialPath(dir), `${JSON.stringify(trial, null, 2)}\n`, 0o600);
}

/** Forgets an update that never began (nothing was written to a slot). */
export const dropTrialRecord = (dir = UPDATE_DIR) => rmSync(trialPath(dir), { force: true });

/** Ends the record of an update: it moves to last.json, the report's and `status`'s source. */
export function finishTrial(/** @type {Trial} */ trial, dir = UPDATE_DIR) {
  writeAtomic(lastPath(dir), `${JSON.stringify(trial, null, 2)}\n`, 0o600);
  rmSync(trialPath(dir), { force: true });
}

/** @returns {Trial | undefined} */
export const readLast = (dir = UPDATE_DIR) => readJson(lastPath(dir));

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

export const log = (/** @type {string} */ message) => process.stdout.write(`harbor-update: ${message}\n`);
/** A line the journal keeps at warning priority (systemd reads the <4> prefix on a service's output). */
export const warn = (/** @type {string} */ message) =>
  process.stdout.write(`${process.env['JOURNAL_STREAM'] ? '<4>' : ''}harbor-update: ${message}\n`);

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
export function audit(action, outcome, subject, detail) {
  try {
    const { program, env } = gatewayRun('/');
    recordAudit([{ action, outcome, actor: 'harbor-update', subject, detail }], { command: [...program, 'audit', 'record'], env, log });
  } catch (error) {
    log(`not in the audit trail (${action} ${outcome}): ${/** @type {Error} */ (error).message}`);
  }
}

/**
 * @param {string} command
 * @param {string[]} args
 * @param {{ quiet?: boolean, timeout?: number }} [options]
 */
export function run(command, args, options = {}) {
  const result = spawnSync(command, args, {
    encoding: 'utf8',
    stdio: options.quiet ? 'pipe' : ['ignore', 'inherit', 'pipe'],
    timeout: options.timeout,
  });
  return {
    ok: result.status === 0,
    stdout: result.stdout ?? '',
    stderr: (result.stderr ?? result.error?.message ?? '').trim(),
    status: result.status,
  };
}

export const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One line of text, whatever a tool printed. */
export const oneLine = (/** @type {string} */ text, max = 400) =>
  text
    .replace(/\s*\n\s*/g, ' | ')
    .trim()
    .slice(0, max);

/** The outcome in harbor-update-result.txt on the boot partition (read on a laptop: CRLF). */
export function writeResult(/** @type {string} */ text, boot = BOOT_DIR) {
  writeAtomic(join(boot, RESULT_FILE), `${new Date().toISOString()} ${text}\r\n`);
  log(text);
}

/** An outcome told everywhere it is looked for: the boot partition's result file and the screen. */
export function announce(/** @type {string} */ text, boot = BOOT_DIR) {
  writeResult(text, boot);
  writeAtomic(UPDATE_ISSUE, `${text}\n\n`);
}
