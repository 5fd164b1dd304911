import { existsSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { resolveDataDir } from '../config/data-dir.js';
import { SETTINGS } from '../config/settings.js';
import { saveMultipartFile } from './multipart-file.js';

/**
 * Where the appliance plugs in the upload of an update bundle from the console (Certificate and
 * settings page, `POST /console/update`). Elsewhere there is no installer: the page shows no upload
 * form and the route answers 404. The route has already checked the session, the form token and
 * the origin before it hands the request over; the body is the browser's multipart/form-data
 * upload (field `bundle`), unread, for the installer to stream to disk rather than hold in memory.
 */
export interface UpdateInstaller {
  /** One line for the page: what an upload does here. */
  readonly description: string;
  /** Takes the uploaded bundle; resolves with what the page tells the technician. */
  install(request: Request): Promise<{ ok: boolean; message: string }>;
}

/** Written by the appliance's image build: this system is the appliance, with harbor-update. */
export const APPLIANCE_RELEASE_FILE = '/etc/harbor-appliance-release';
/**
 * The upload folder in the gateway's state directory. The gateway runs unprivileged; the appliance's
 * harbor-update-upload.path (root) sees BUNDLE appear there, takes it, checks its signature and
 * version with `harbor-update`, and answers in VERDICT (appliance/board/update.mjs, installUpload).
 */
export const UPLOAD_FOLDER = 'update-upload';
export const UPLOAD_BUNDLE = 'bundle.raucb';
export const UPLOAD_VERDICT = 'result.json';
/** A release's bundle is about 300 MiB; the boot partition a technician could copy one to holds 1 GiB. */
const MAX_BUNDLE_BYTES = 1024 * 1024 * 1024;
/** Checking the signature takes seconds on a board; longer than this, the page says where to look. */
const VERDICT_WAIT_MS = 5 * 60_000;

/** What harbor-update writes once it has looked at an uploaded bundle. */
interface Verdict {
  state: 'refused' | 'installing' | 'failed';
  message: string;
}

/** The installer of this system: on the appliance the one of its updater, elsewhere none. */
export function updateInstaller(env: Record<string, string | undefined> = process.env): UpdateInstaller | undefined {
  if (!existsSync(APPLIANCE_RELEASE_FILE)) return undefined;
  return folderInstaller({ folder: join(resolveDataDir(env['DATA_DIR'] || (SETTINGS.dataDir.default ?? '.')), UPLOAD_FOLDER) });
}

/**
 * Streams the upload into the folder, hands it over by renaming it to its final name, and waits
 * for the verdict of the system's updater in that folder.
 */
export function folderInstaller({ folder, verdictWaitMs = VERDICT_WAIT_MS }: { folder: string; verdictWaitMs?: number }): UpdateInstaller {
  return {
    description:
      'Upload a signed update bundle (.raucb). The board checks its signature and version before it writes anything, installs it into its other system partition, restarts into it on trial and keeps it only once the gateway is ready.',
    async install(request) {
      await mkdir(folder, { recursive: true, mode: 0o750 });
      const partial = join(folder, `${UPLOAD_BUNDLE}.part`);
      const verdictFile = join(folder, UPLOAD_VERDICT);
      await rm(verdictFile, { force: true });
      const saved = await saveMultipartFile({ request, field: 'bundle', destination: partial, maxBytes: MAX_BUNDLE_BYTES });
      if ('problem' in saved) {
        await rm(partial, { force: true });
        return { ok: false, message: `The upload was not taken: ${saved.problem}. Nothing was installed.` };
      }
      // On disk before the updater reads it.
      const handle = await open(partial, 'r');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(partial, join(folder, UPLOAD_BUNDLE));
      const verdict = await waitForVerdict(verdictFile, verdictWaitMs);
      if (verdict === undefined) {
        return {
          ok: true,
          message: `The bundle (${saved.bytes} bytes) was received; the board is still checking it. The outcome is written to harbor-update-result.txt on the boot partition and shown on the board's screen.`,
        };
      }
      return { ok: verdict.state === 'installing', message: verdict.message };
    },
  };
}

async function waitForVerdict(file: string, waitMs: number): Promise<Verdict | undefined> {
  const deadline = Date.now() + waitMs;
  while (Date.now() < deadline) {
    try {
      const verdict = JSON.parse(await readFile(file, 'utf8')) as Verdict;
      if (typeof verdict.message === 'string') return verdict;
    } catch {
      // not written yet
    }
    await sleep(500);
  }
  return undefined;
}
