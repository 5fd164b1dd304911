import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import * as z from 'zod';
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
  /** The release that runs and the one the board can go back to; undefined while the updater has not said. */
  releases(): ApplianceReleases | undefined;
  /** Asks the board to go back to `to`, the previous release the page offered; resolves with what the page tells. */
  rollBack(to: string): Promise<{ ok: boolean; message: string }>;
}

/** The releases as the appliance's updater describes them at every boot and after each change (appliance/board/banner.mjs). */
const releasesSchema = z.object({
  version: z.string(),
  slot: z.string().nullable(),
  trial: z.boolean(),
  previous: z.object({ version: z.string(), slot: z.string() }).nullable(),
  previousUnavailable: z.string().nullable(),
  lastUpdate: z.string().nullable(),
});
export type ApplianceReleases = z.infer<typeof releasesSchema>;

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
/** The wish to go back to the previous release, `{"to": version}`, which the appliance's harbor-update-rollback.path takes. */
export const ROLLBACK_REQUEST = 'rollback.request';
/** Written by the appliance's updater, readable by every user: the releases the board has. */
export const APPLIANCE_RELEASES_FILE = '/run/harbor-appliance/release.json';
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

function readReleases(file: string): ApplianceReleases | undefined {
  try {
    const parsed = releasesSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Streams the upload into the folder, hands it over by renaming it to its final name, and waits
 * for the verdict of the system's updater in that folder.
 */
export function folderInstaller({
  folder,
  releasesFile = APPLIANCE_RELEASES_FILE,
  verdictWaitMs = VERDICT_WAIT_MS,
}: {
  folder: string;
  releasesFile?: string;
  verdictWaitMs?: number;
}): UpdateInstaller {
  return {
    releases: () => readReleases(releasesFile),
    async rollBack(to) {
      await mkdir(folder, { recursive: true, mode: 0o750 });
      const verdictFile = join(folder, UPLOAD_VERDICT);
      await rm(verdictFile, { force: true });
      // Whole before the updater's path unit sees it.
      const partial = join(folder, `${ROLLBACK_REQUEST}.part`);
      await writeFile(partial, `${JSON.stringify({ to })}\n`, { mode: 0o640 });
      await rename(partial, join(folder, ROLLBACK_REQUEST));
      const verdict = await waitForVerdict(verdictFile, verdictWaitMs);
      if (verdict === undefined)
        return {
          ok: true,
          message: `The board was asked to go back to ${to} and has not answered yet. The outcome is shown on the board's screen and written to harbor-update-result.txt on the boot partition.`,
        };
      return { ok: verdict.state === 'installing', message: verdict.message };
    },
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
