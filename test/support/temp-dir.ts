import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/** A new directory `harbor-<label>-XXXXXX` in the temporary directory, removed after the test file. */
export function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `harbor-${label}-`));
  made.push(dir);
  return dir;
}

/** Removes the directories `tempDir` made; `temp-dir-cleanup.ts` runs it after each test file. */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
