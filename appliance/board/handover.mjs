// The queue across releases of different queue formats. A release never changes a queue file a newer
// one wrote (it refuses to start on it), so when the board goes from a release to one that cannot
// read its queue file (a failed trial of a newer format, or going back to an older release), the
// file is set aside and its readings are handed over: the release that wrote the file exports them
// (`harbor-gateway queue export`: ingest batches, each reading with its stored time in full), and
// the release that runs now takes them through its ingest API on the board's loopback, as a device
// would send them. A reading sent twice (a power cut between an answer and the note of it) lands on
// the same deduplication keys in QuestDB, (time, ship_id, cargo_id), and is stored once.
//
// One folder a handover, under HANDOVER_DIR: handover.json (what and how far), queue/ (the file set
// aside), before/ (after a failed trial: the copy from before it, so only the trial's own readings
// are exported; the older release got the copy back and delivers the rest itself),
// readings.ndjson, progress (batches taken), refused.ndjson (readings the release refused). Once
// done, the folder moves to handed-over/ with what is kept: the record, refused readings, and the
// file set aside when it holds dead letters (which no release delivers).
import { spawnSync } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { syncDirectory, syncFile, writeAtomic } from './files.mjs';
import { slotDevice } from './rauc.mjs';
import { GATEWAY_STATE, UPDATE_DIR, log, oneLine, readJson, sleep, warn } from './records.mjs';
import { userVersion } from './sqlite-header.mjs';

export const QUEUE_SNAPSHOT = 'queue-before-trial';
export const HANDOVER_DIR = `${UPDATE_DIR}/handover`;
const QUEUE_FILES = ['queue.db', 'queue.db-wal'];
/** The gateway in a slot, and its command that exports a queue file. */
const GATEWAY = ['/usr/bin/node', '/opt/harbor-gateway/dist/gateway.mjs'];

/**
 * @typedef {object} Handover
 * @property {string} id
 * @property {string} from          the release whose queue file it is
 * @property {string} to            the release that takes the readings
 * @property {'A' | 'B' | null} exporter  the slot whose release exports the file (null: the running one)
 * @property {boolean} after        only what the file holds beyond before/
 * @property {'export' | 'replay' | 'done' | 'kept'} state
 * @property {string} announcement  the outcome told with it
 * @property {{ readings: number, batches: number, deadLetters: number }} [exported]
 * @property {number} [refused]
 * @property {string} [problem]
 */

/**
 * The queue file's format as the next open reads it: SQLite's user_version, from its log when a
 * commit there has not reached the file (a trial cut short after upgrading it); undefined without a file.
 */
export function queueFormatOf(/** @type {string} */ path) {
  return userVersion(path);
}

/** The files of a folder and the folder itself on disk, before anything relies on them. */
function syncTree(/** @type {string} */ dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isFile()) syncFile(path);
  }
  syncDirectory(dir);
}

/** Moves the queue's files (with SQLite's shared memory, which belongs to them) from one folder to another. */
function moveQueue(/** @type {string} */ from, /** @type {string} */ to) {
  mkdirSync(to, { recursive: true, mode: 0o700 });
  for (const name of [...QUEUE_FILES, 'queue.db-shm']) if (existsSync(join(from, name))) renameSync(join(from, name), join(to, name));
  syncTree(to);
  syncDirectory(from);
}

/**
 * Before a trial's gateway opens the queue for the first time: when the new release would upgrade
 * the file's format, keep a copy of it, so that a failed trial gives the old release back a file
 * it can open. Root runs this with the gateway stopped, so the file and its WAL are copied as one state.
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

const handoverId = (/** @type {Date} */ now) => now.toISOString().replace(/[:.]/g, '-');

function writeHandover(/** @type {string} */ dir, /** @type {Handover} */ handover) {
  writeAtomic(join(dir, 'handover.json'), `${JSON.stringify(handover, null, 2)}\n`, 0o600);
}

/**
 * After a failed trial, on the committed slot, before its gateway starts: when the trial upgraded the
 * queue's format, its file is set aside untouched and the copy from before the trial is put back;
 * the readings the trial took are to be handed over, exported by the failed slot's release.
 * Returns what was done, for the report.
 * @param {{ trial: import('./records.mjs').Trial, stateDir?: string, updateDir?: string, now?: Date }} options
 */
export function setAsideAfterTrial({ trial, stateDir = GATEWAY_STATE, updateDir = UPDATE_DIR, now = new Date() }) {
  const snapshot = join(updateDir, QUEUE_SNAPSHOT);
  if (!existsSync(join(snapshot, 'queue.db'))) return undefined;
  const before = queueFormatOf(join(snapshot, 'queue.db'));
  const after = queueFormatOf(join(stateDir, 'queue.db'));
  if (before === undefined || after === undefined || after <= before) {
    rmSync(snapshot, { recursive: true, force: true });
    return undefined;
  }
  const id = handoverId(now);
  const dir = join(updateDir, 'handover', id);
  moveQueue(stateDir, join(dir, 'queue'));
  for (const name of QUEUE_FILES) if (existsSync(join(snapshot, name))) copyFileSync(join(snapshot, name), join(stateDir, name));
  syncTree(stateDir);
  renameSync(snapshot, join(dir, 'before'));
  syncDirectory(dir);
  writeHandover(dir, {
    id,
    from: trial.to,
    to: trial.from,
    exporter: trial.slot,
    after: true,
    state: 'export',
    announcement: '',
  });
  return { dir, text: `the trial had upgraded the queue to format ${after}; the format-${before} queue from before it was put back` };
}

/**
 * Before going back to a release of an older queue format, with the gateway stopped: the queue file
 * is set aside and exported by the running release at once (its slot is the one about to be left).
 * @param {{ from: string, to: string, stateDir?: string, updateDir?: string, now?: Date, exporter?: Exporter }} options
 * @returns {{ dir: string, handover: Handover } | { problem: string }}
 */
export function setAsideForRollback({
  from,
  to,
  stateDir = GATEWAY_STATE,
  updateDir = UPDATE_DIR,
  now = new Date(),
  exporter = exportInSlot,
}) {
  const id = handoverId(now);
  const dir = join(updateDir, 'handover', id);
  if (!existsSync(join(stateDir, 'queue.db'))) return { problem: 'there is no queue file' };
  moveQueue(stateDir, join(dir, 'queue'));
  /** @type {Handover} */
  const handover = { id, from, to, exporter: null, after: false, state: 'export', announcement: '' };
  writeHandover(dir, handover);
  const exported = exportHandover(dir, handover, exporter);
  if (exported.state !== 'replay') {
    // Nothing changes: the queue goes back where it was, the board stays on this release.
    moveQueue(join(dir, 'queue'), stateDir);
    rmSync(dir, { recursive: true, force: true });
    return { problem: exported.problem ?? 'the export failed' };
  }
  return { dir, handover: exported };
}

/**
 * Runs a release's `queue export` on a handover folder: that of `slot` (mounted read-only, in a mount
 * namespace of its own that ends with the command) or the running one (null). Returns the summary it
 * printed, or throws with its error.
 * @typedef {(slot: 'A' | 'B' | null, dir: string, after: boolean) => { readings: number, batches: number, deadLetters: number }} Exporter
 * @param {'A' | 'B' | null} slot
 * @param {string} dir
 * @param {boolean} after
 * @param {string[]} [gateway]  the running release's Node and bundle
 */
export function exportInSlot(slot, dir, after, gateway = GATEWAY) {
  const args = [
    'queue',
    'export',
    '/mnt/queue/queue.db',
    ...(after ? ['--after', '/mnt/before/queue.db'] : []),
    '--out',
    '/mnt/readings.ndjson',
  ];
  const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };
  const result =
    slot === null
      ? spawnSync(gateway[0] ?? '', [...gateway.slice(1), ...args.map((arg) => arg.replace(/^\/mnt/, dir))], {
          encoding: 'utf8',
          env,
          timeout: 600_000,
        })
      : spawnSync(
          'unshare',
          [
            '--mount',
            '--propagation',
            'private',
            '--',
            '/bin/sh',
            '-ec',
            'mkdir -p "$2"; mount -o ro "$1" "$2"; mount --bind /proc "$2/proc"; mount --bind /dev "$2/dev"; mount --bind "$3" "$2/mnt"; shift 3; exec chroot "$@"',
            'export',
            slotDevice(slot),
            `/run/harbor-appliance/slot-${slot}`,
            dir,
            `/run/harbor-appliance/slot-${slot}`,
            ...GATEWAY,
            ...args,
          ],
          { encoding: 'utf8', env, timeout: 600_000 },
        );
  if (result.status !== 0)
    throw new Error(oneLine(result.stderr || result.error?.message || `exit status ${result.status ?? result.signal}`, 500));
  const summary = JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}');
  return { readings: Number(summary.readings), batches: Number(summary.batches), deadLetters: Number(summary.deadLetters) };
}

/**
 * The export step of one handover: readings.ndjson written (state replay), or the files kept and
 * why (state kept).
 * @param {string} dir
 * @param {Handover} handover
 * @param {Exporter} exporter
 * @returns {Handover}
 */
function exportHandover(dir, handover, exporter) {
  try {
    const exported = exporter(handover.exporter, dir, handover.after);
    syncDirectory(dir);
    const next = { ...handover, state: /** @type {const} */ ('replay'), exported };
    writeHandover(dir, next);
    log(`exported ${exported.readings} readings of ${handover.from}'s queue file for ${handover.to} (${dir})`);
    return next;
  } catch (error) {
    const next = {
      ...handover,
      state: /** @type {const} */ ('kept'),
      problem: `${handover.from} could not export the readings of its queue file (${/** @type {Error} */ (error).message}); the file is kept in ${join(doneFolder(dir), 'queue')}`,
    };
    writeHandover(dir, next);
    warn(next.problem);
    return next;
  }
}

/** The handover folders, oldest first, with their records. */
export function handovers(updateDir = UPDATE_DIR) {
  const root = join(updateDir, 'handover');
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .sort()
    .map((id) => ({ dir: join(root, id), handover: /** @type {Handover | undefined} */ (readJson(join(root, id, 'handover.json'))) }))
    .filter((entry) => entry.handover !== undefined)
    .map((entry) => ({ dir: entry.dir, handover: /** @type {Handover} */ (entry.handover) }));
}

/**
 * Exports what waits to be exported: before a slot is written, since a failed trial's readings are
 * exported by the release in that slot.
 */
export function exportPending({ updateDir = UPDATE_DIR, exporter = exportInSlot } = {}) {
  for (const { dir, handover } of handovers(updateDir)) if (handover.state === 'export') exportHandover(dir, handover, exporter);
}

/**
 * What an ingest API answered to one batch, as the replay takes it: taken, refused for its content
 * (each reading is then tried alone), or not now (the gateway is starting, busy or full).
 * @param {number} status
 * @returns {'taken' | 'refused' | 'later'}
 */
export function answerOf(status) {
  if (status >= 200 && status < 300) return 'taken';
  if ([400, 413, 422].includes(status)) return 'refused';
  return 'later';
}

/**
 * @typedef {object} Ingest
 * @property {(body: string, site: string | null, key: string) => Promise<{ status: number, text: string }>} post
 * @property {() => Promise<boolean>} ready
 * @property {(ms: number) => Promise<void>} wait
 */

/**
 * Sends a handover's batches to the running release's ingest API, from where the last run stopped;
 * a batch refused for its content is sent reading by reading, and what is still refused is kept in
 * refused.ndjson. Returns the readings refused.
 * @param {string} dir
 * @param {Handover} handover
 * @param {Ingest} ingest
 */
export async function replayHandover(dir, handover, ingest) {
  const lines = readFileSync(join(dir, 'readings.ndjson'), 'utf8')
    .split('\n')
    .filter((line) => line !== '');
  const progressFile = join(dir, 'progress');
  let done = existsSync(progressFile) ? Number(readFileSync(progressFile, 'utf8')) || 0 : 0;
  let refused = existsSync(join(dir, 'refused.ndjson')) ? readFileSync(join(dir, 'refused.ndjson'), 'utf8').split('\n').length - 1 : 0;
  let delay = 1000;
  while (!(await ingest.ready())) await ingest.wait(5000);
  /** Sends until the API takes or refuses it; `later` answers are waited out. */
  const send = async (/** @type {string} */ body, /** @type {string | null} */ site, /** @type {string} */ key) => {
    for (;;) {
      let answer;
      try {
        answer = await ingest.post(body, site, key);
      } catch (error) {
        answer = { status: 0, text: /** @type {Error} */ (error).message };
      }
      const kind = answerOf(answer.status);
      if (kind !== 'later') {
        delay = 1000;
        return { kind, answer };
      }
      if (delay >= 30_000)
        warn(`handing readings to ${handover.to}: its ingest answers ${answer.status} ${oneLine(answer.text, 200)}; trying again`);
      await ingest.wait(delay);
      delay = Math.min(delay * 2, 60_000);
    }
  };
  for (; done < lines.length; done++) {
    const batch = JSON.parse(String(lines[done]));
    const { kind, answer } = await send(batch.body, batch.site, `handover-${handover.id}-${done}`);
    if (kind === 'refused') {
      const readings = JSON.parse(batch.body);
      for (const [index, reading] of readings.entries()) {
        const one = await send(JSON.stringify([reading]), batch.site, `handover-${handover.id}-${done}-${index}`);
        if (one.kind === 'refused') {
          appendFileSync(
            join(dir, 'refused.ndjson'),
            `${JSON.stringify({ site: batch.site, reading, answer: oneLine(one.answer.text, 500) })}\n`,
          );
          refused += 1;
        }
      }
      log(
        `${handover.to} refused a batch of the handover (${oneLine(answer.text, 200)}): sent reading by reading, ${refused} refused so far`,
      );
    }
    writeAtomic(progressFile, String(done + 1), 0o600);
  }
  return refused;
}

/**
 * Ends a handover: the copies it no longer needs removed, the file set aside kept only when it
 * holds what was not handed over (its dead letters), and the outcome in words.
 * @param {string} dir
 * @param {Handover} handover
 * @param {number} refused
 */
function finishHandover(dir, handover, refused) {
  const exported = handover.exported ?? { readings: 0, batches: 0, deadLetters: 0 };
  const keep = exported.deadLetters > 0;
  const record = doneFolder(dir);
  const words = [
    `The ${exported.readings} readings left in the queue of ${handover.from} were handed to ${handover.to}${refused > 0 ? `; ${handover.to} refused ${refused} of them, kept in ${join(record, 'refused.ndjson')}` : ''}.`,
  ];
  if (keep) words.push(`The queue file, with ${exported.deadLetters} dead letters, is kept in ${join(record, 'queue')}.`);
  rmSync(join(dir, 'before'), { recursive: true, force: true });
  rmSync(join(dir, 'readings.ndjson'), { force: true });
  if (!keep) rmSync(join(dir, 'queue'), { recursive: true, force: true });
  /** @type {Handover} */
  const next = { ...handover, state: 'done', refused, announcement: words.join(' ') };
  writeHandover(dir, next);
  retire(dir);
  return next;
}

/** Where a handover's folder goes once nothing is left to do: out of the pending ones, kept as its record. */
const doneFolder = (/** @type {string} */ dir) => join(dir, '..', '..', 'handed-over', basename(dir));

function retire(/** @type {string} */ dir) {
  const done = doneFolder(dir);
  mkdirSync(join(done, '..'), { recursive: true, mode: 0o700 });
  rmSync(done, { recursive: true, force: true });
  renameSync(dir, done);
  syncDirectory(join(dir, '..'));
  syncDirectory(join(done, '..'));
}

/**
 * harbor-update handover (harbor-update-handover.service, after the gateway): every pending
 * handover exported if it still is to be, then sent to the running gateway. Returns the outcomes in
 * words, for the report.
 * @param {{ ingest: Ingest, updateDir?: string, exporter?: Exporter }} options
 */
export async function runHandovers({ ingest, updateDir = UPDATE_DIR, exporter = exportInSlot }) {
  /** @type {string[]} */
  const told = [];
  for (const entry of handovers(updateDir)) {
    let { handover } = entry;
    if (handover.state === 'export') handover = exportHandover(entry.dir, handover, exporter);
    if (handover.state === 'kept') {
      handover = { ...handover, announcement: handover.problem ?? '' };
      writeHandover(entry.dir, handover);
      retire(entry.dir);
      told.push(handover.announcement);
    }
    if (handover.state !== 'replay') continue;
    log(`handing ${handover.exported?.readings ?? 0} readings of ${handover.from}'s queue file to ${handover.to}`);
    const refused = await replayHandover(entry.dir, handover, ingest);
    handover = finishHandover(entry.dir, handover, refused);
    log(handover.announcement);
    told.push(handover.announcement);
  }
  return told;
}

/** The running gateway's ingest API on loopback, with the site's API key. */
export function loopbackIngest(/** @type {{ port: string, apiKey: string }} */ { port, apiKey }) {
  const base = `http://127.0.0.1:${port}`;
  return {
    ready: async () => {
      try {
        return (await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(5000) })).ok;
      } catch {
        return false;
      }
    },
    post: async (/** @type {string} */ body, /** @type {string | null} */ site, /** @type {string} */ key) => {
      /** @type {Record<string, string>} */
      const headers = { 'content-type': 'application/json', 'x-api-key': apiKey, 'idempotency-key': key };
      if (site !== null) headers['x-harbor-site'] = encodeURIComponent(site);
      const response = await fetch(`${base}/api/v2/ingest/batch`, { method: 'POST', headers, body, signal: AbortSignal.timeout(120_000) });
      return { status: response.status, text: await response.text() };
    },
    wait: sleep,
  };
}
