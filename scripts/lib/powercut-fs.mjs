// Simulated power cuts for tests and fault runs: builds scripts/powercut-fs (Go, go-fuse) into the
// cache once per source version and mounts it over a backing directory.
//   const disk = await createPowercutDisk();  const fs = await disk.mount();
//   ...write under fs.mountPoint...;  await fs.cut();  await fs.unmount();  disk.remove();
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { aptInstall } from './apt.mjs';
import { cacheDir, projectRoot } from './paths.mjs';

const SOURCE = join(projectRoot, 'scripts', 'powercut-fs');

/** The powercut-fs binary for the current sources, built with the Go toolchain on first use. */
export function buildPowercutFs() {
  aptInstall(['fuse3'], '/usr/bin/fusermount3');
  const hash = createHash('sha256');
  for (const name of readdirSync(SOURCE).sort()) {
    if (/\.go$|^go\.(mod|sum)$/.test(name)) hash.update(name).update(readFileSync(join(SOURCE, name)));
  }
  const binary = join(cacheDir(), `powercut-fs-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(binary)) return binary;
  const partial = `${binary}.${process.pid}.part`;
  try {
    execFileSync('go', ['build', '-o', partial, '.'], {
      cwd: SOURCE,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, GOFLAGS: '-mod=mod' },
    });
  } catch (error) {
    rmSync(partial, { force: true });
    const missing = /** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT';
    throw new Error(missing ? 'powercut-fs needs the Go toolchain (go 1.24 or newer) on PATH' : `building powercut-fs failed: ${error}`);
  }
  renameSync(partial, binary);
  return binary;
}

/**
 * What a cut keeps of the changes that are not durable (scripts/powercut-fs/cut.go): `drop` none,
 * `tear` part of one write drawn from all of them, `subset` an arbitrary subset within what a disk
 * and kernel can produce between two fsyncs.
 * @typedef {'drop' | 'tear' | 'subset'} CutModel
 * @typedef {{ model: CutModel, seed: string, keep?: number, writes: number, resizes: number, kept: number, entries: number,
 *             keptEntries: number, undone?: string[], torn?: string, fsyncEios: number, enospcs: number, errors?: string[] }} CutReport
 *   `writes`, `resizes`: changes not durable at the cut; `kept`: of those, how many landed;
 *   `entries`: entry changes undone; `keptEntries`: entry changes not durable that landed;
 *   `fsyncEios`, `enospcs`: the faults produced since the mount.
 * @typedef {object} PowercutMount
 * @property {string} mountPoint
 * @property {(options?: { model?: CutModel, seed?: number }) => Promise<CutReport>} cut  undoes what is not durable (keeping what the model allows); the mount fails every change afterwards
 * @property {() => Promise<{ files: number, changes: number, entries: number, cut: boolean }>} status
 * @property {() => Promise<{ files: number, changes: number, entries: number, cut: boolean }>} writeBack  makes everything pending durable
 * @property {(ageMs: number) => Promise<{ files: number, changes: number, entries: number, cut: boolean }>} writeBackOlder  makes durable what has been pending for at least ageMs
 * @property {(kind: 'dir' | 'file', count?: number) => Promise<unknown>} failFsyncs  makes the next `count` (1) directory fsyncs that have
 *   entries to commit, or file fsyncs that have writes to make durable, fail with EIO
 * @property {() => Promise<void>} unmount
 */

/**
 * A backing directory in the system temp directory that can be mounted, cut and mounted again:
 * what survives a cut stays in the backing directory for the next mount. `entries` says what makes
 * a directory entry change durable: an fsync of its directory (`per-directory`, as POSIX promises)
 * or any fsync (`ext4`, whose journal commits every earlier change with it). `writebackAfterMs`
 * turns on the kernel's age-based writeback: every `writebackEveryMs` (default 5 s) what has been
 * pending that long becomes durable; without it only fsync makes anything durable. sync(2) and
 * syncfs(2) make nothing durable (FUSE does not pass them on).
 *
 * Faults, drawn from `seed` (plus the number of earlier mounts): `fsyncEio` is the chance an fsync with something to write fails with
 * EIO and its writes are dropped as written (a later fsync succeeds without them); `enospc` the
 * chance a write that grows a file fails with ENOSPC; `lyingFlushMs` acknowledges every fsync at
 * once and makes it durable only that much later.
 * @param {{ entries?: 'per-directory' | 'ext4', writebackAfterMs?: number, writebackEveryMs?: number } & DiskFaults} [options]
 * @typedef {{ fsyncEio?: number, enospc?: number, lyingFlushMs?: number, seed?: number }} DiskFaults
 */
export async function createPowercutDisk(options = {}) {
  const binary = buildPowercutFs();
  const root = mkdtempSync(join(tmpdir(), 'harbor-powercut-'));
  const backing = join(root, 'backing');
  const mountPoint = join(root, 'mnt');
  mkdirSync(backing);
  mkdirSync(mountPoint);
  /** @type {PowercutMount | undefined} */
  let mounted;
  let mounts = 0;
  return {
    backing,
    mountPoint,
    /** @returns {Promise<PowercutMount>} */
    async mount() {
      mounts += 1;
      mounted = await mountPowercutFs(binary, {
        backing,
        trash: join(root, 'trash'),
        mountPoint,
        control: join(root, 'control.sock'),
        entries: options.entries ?? 'per-directory',
        flags: [
          ...(options.writebackAfterMs
            ? ['-writeback-after', `${options.writebackAfterMs}ms`, '-writeback-every', `${options.writebackEveryMs ?? 5000}ms`]
            : []),
          ...(options.fsyncEio ? ['-fsync-eio', String(options.fsyncEio)] : []),
          ...(options.enospc ? ['-enospc', String(options.enospc)] : []),
          ...(options.lyingFlushMs ? ['-lying-flush', `${options.lyingFlushMs}ms`] : []),
          // A new draw of faults at every mount, still repeatable from the disk's seed.
          ...(options.seed === undefined ? [] : ['-seed', String(options.seed + mounts)]),
        ],
      });
      return mounted;
    },
    /** Unmounts when still mounted and removes everything; a failed unmount is the error reported. */
    async remove() {
      try {
        if (mounted) await mounted.unmount();
      } catch (error) {
        try {
          rmSync(root, { recursive: true, force: true });
        } catch {
          // What is left of a mount that would not go; the unmount's error says why.
        }
        throw error;
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * @param {string} binary
 * @param {{ backing: string, trash: string, mountPoint: string, control: string, entries: string, flags: string[] }} paths
 * @returns {Promise<PowercutMount>}
 */
async function mountPowercutFs(binary, paths) {
  const child = spawn(
    binary,
    [
      '-backing',
      paths.backing,
      '-trash',
      paths.trash,
      '-mount',
      paths.mountPoint,
      '-control',
      paths.control,
      '-entries',
      paths.entries,
      ...paths.flags,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (/** @type {Buffer} */ chunk) => (output += chunk.toString()));
  child.stderr.on('data', (/** @type {Buffer} */ chunk) => (output += chunk.toString()));
  /** @type {Promise<number | null>} */
  const exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  exited.then(() => process.off('exit', killOnExit));
  const deadline = Date.now() + 15_000;
  while (!output.includes('ready')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`powercut-fs did not mount ${paths.mountPoint}: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  const command = async (/** @type {string} */ line) => {
    try {
      return JSON.parse(await ask(paths.control, line));
    } catch (error) {
      // Its own output says why (a Go panic, say).
      throw new Error(`powercut-fs did not answer ${line}: ${error}\n${output.slice(-4000)}`);
    }
  };
  let unmounted = false;
  return {
    mountPoint: paths.mountPoint,
    cut: (options = {}) => command(['cut', options.model ?? 'drop', ...(options.seed === undefined ? [] : [options.seed])].join(' ')),
    status: () => command('status'),
    writeBack: () => command('writeback'),
    writeBackOlder: (ageMs) => command(`writeback-older ${Math.round(ageMs)}`),
    failFsyncs: (kind, count = 1) => command(`fail-fsync ${kind} ${count}`),
    async unmount() {
      if (unmounted) return;
      unmounted = true;
      if (child.exitCode === null) await command('unmount');
      const code = await exited;
      if (isMounted(paths.mountPoint)) {
        execFileSync('fusermount3', ['-u', '-z', paths.mountPoint]);
        throw new Error(`powercut-fs could not unmount ${paths.mountPoint} (a file still open?), unmounted lazily: ${output}`);
      }
      if (code !== 0 && code !== null) throw new Error(`powercut-fs exited ${code}: ${output}`);
    },
  };
}

/** @param {string} path */
function isMounted(path) {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[1] === path);
}

/** Sends one command line to the control socket and resolves with the answer line. @param {string} socket @param {string} line */
function ask(socket, line) {
  return new Promise((resolve, reject) => {
    const connection = createConnection(socket);
    let answer = '';
    connection.on('error', reject);
    connection.on('close', () => reject(new Error(`powercut-fs closed its control socket without answering ${line}`)));
    connection.on('data', (chunk) => {
      answer += chunk.toString();
      const end = answer.indexOf('\n');
      if (end >= 0) {
        connection.end();
        resolve(answer.slice(0, end));
      }
    });
    connection.write(`${line}\n`);
  });
}
