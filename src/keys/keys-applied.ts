import { readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

/**
 * Which version of the key file a running gateway has applied: written by the gateway after each
 * load of the file, read by `keys add|revoke`, which returns once the gateway has applied its change.
 */
export interface KeysApplied {
  /** The key file, as an absolute path. */
  path: string;
  /** Its identity and change time when it was read (`keyFileVersion`). */
  version: string;
  /** Its change time alone, in nanoseconds: a later change than the one waited for counts too. */
  mtimeNs: string;
  pid: number;
}

/** `DATA_DIR/keys-applied.json`. */
export const keysAppliedPath = (dataDir: string): string => resolve(dataDir, 'keys-applied.json');

/** The key file's identity and change time: `keys add` replaces it by rename, editors write in place. */
export function keyFileVersion(path: string): { version: string; mtimeNs: string; ino: string } {
  try {
    const stat = statSync(path, { bigint: true });
    return { version: `${stat.ino}:${stat.size}:${stat.mtimeNs}`, mtimeNs: String(stat.mtimeNs), ino: String(stat.ino) };
  } catch {
    return { version: 'missing', mtimeNs: '0', ino: '' };
  }
}

/** Whole (rename), so a reader never sees half of it; not fsynced: it says what this run applied, nothing to recover. */
export function writeKeysApplied(file: string, applied: KeysApplied): void {
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, `${JSON.stringify(applied)}\n`, { mode: 0o640 });
    renameSync(temporary, file);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}

export function readKeysApplied(file: string): KeysApplied | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<KeysApplied>;
    if (typeof parsed.path !== 'string' || typeof parsed.version !== 'string' || typeof parsed.mtimeNs !== 'string') return undefined;
    return { path: parsed.path, version: parsed.version, mtimeNs: parsed.mtimeNs, pid: Number(parsed.pid) };
  } catch {
    return undefined;
  }
}

/** True when `applied` is the version of `path` a writer made, or a later one. */
export function appliedAtLeast(applied: KeysApplied | undefined, path: string, written: { version: string; mtimeNs: string }): boolean {
  if (applied === undefined || applied.path !== resolve(path)) return false;
  return applied.version === written.version || BigInt(applied.mtimeNs) > BigInt(written.mtimeNs);
}
