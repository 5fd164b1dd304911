// The local console's way to the updater. The gateway runs unprivileged: it leaves a request in its
// own state folder (an uploaded bundle, or the wish to go back to the previous release); a path unit
// (root) starts harbor-update, which takes the request out of the gateway's reach before it reads
// it and answers in a verdict file the gateway reads (src/console/update-bundle.ts).
import {
  closeSync,
  constants,
  fchownSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { GATEWAY_STATE } from './records.mjs';

export const UPLOAD_DIR = `${GATEWAY_STATE}/update-upload`;
export const UPLOAD_BUNDLE = 'bundle.raucb';
export const ROLLBACK_REQUEST = 'rollback.request';
export const UPLOAD_VERDICT = 'result.json';

/**
 * What became of a request, for whoever handed it over and waits (the console): refused (nothing
 * written), being done, or failed while it was done.
 * @typedef {{ state: 'refused' | 'installing' | 'failed', message: string }} Verdict
 */

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
 * The console's wish to go back: a small JSON file naming the release the page offered
 * (`{"to": "0.4.0"}`), so a page shown before the slots changed cannot send the board elsewhere.
 * Read without following a link the gateway may have left, then removed. Undefined when there is
 * none or it is not such a file.
 * @returns {{ to: string } | undefined}
 */
export function takeRollbackRequest(dir = UPLOAD_DIR) {
  const file = join(dir, ROLLBACK_REQUEST);
  let fd;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    rmSync(file, { force: true });
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size > 4096) return undefined;
    const request = JSON.parse(readFileSync(fd, 'utf8'));
    return typeof request?.to === 'string' ? { to: request.to } : undefined;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
}
