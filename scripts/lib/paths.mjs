// Where the project and its shared download cache are, for every tool, test and benchmark.
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const projectRoot = dirname(dirname(dirname(fileURLToPath(import.meta.url))));

/** ~/.cache/harbor-gateway (or $HARBOR_CACHE_DIR), created on first use; shared by concurrent runs. */
export function cacheDir() {
  const base = process.env.HARBOR_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'harbor-gateway');
  mkdirSync(base, { recursive: true });
  return base;
}
