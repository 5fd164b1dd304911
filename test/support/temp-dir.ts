import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const made: string[] = [];

// Registered when a test file first imports this module, so it runs after that file's own
// afterAll hooks (they run last-registered first): gateways are stopped before their directories go.
afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A new directory `harbor-<label>-XXXXXX` in the temporary directory, removed after the test file. */
export function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `harbor-${label}-`));
  made.push(dir);
  return dir;
}
