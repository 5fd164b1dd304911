// The micro-benchmarks' common parts (bench/hot-path.mjs, bench/kafka-encode.mjs): the gateway's
// sources bundled for them, and their timing. One core, no I/O.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { projectRoot } from '../../scripts/lib/paths.mjs';

/**
 * Bundles `exports` (export statements naming the sources from the repository's root, as
 * `../../src/...`) into bench/.work/<name>.mjs and imports it. Dependencies stay outside the bundle
 * (imported from node_modules), as CommonJS ones that require Node's modules cannot be bundled into ESM.
 * @param {string} name
 * @param {string} exports
 * @returns {Promise<any>}
 */
export async function importSources(name, exports) {
  const work = join(projectRoot, 'bench', '.work');
  mkdirSync(work, { recursive: true });
  const bundle = join(work, `${name}.mjs`);
  await build({
    stdin: { contents: exports, resolveDir: work, sourcefile: join(work, `${name}-entry.ts`), loader: 'ts' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    outfile: bundle,
    packages: 'external',
    logLevel: 'warning',
  });
  return import(pathToFileURL(bundle).href);
}

/** Runs `fn` until `ms` elapsed (after 20 calls to warm it up), returns microseconds per call. @param {() => unknown} fn */
export function microsPerCall(fn, ms = 400) {
  for (let i = 0; i < 20; i++) fn();
  let calls = 0;
  const started = performance.now();
  while (performance.now() - started < ms) {
    fn();
    calls += 1;
  }
  return ((performance.now() - started) * 1000) / calls;
}

/** The median of five runs of microsPerCall. @param {() => unknown} fn */
export function medianOfFive(fn) {
  const runs = Array.from({ length: 5 }, () => microsPerCall(fn)).sort((a, b) => a - b);
  return /** @type {number} */ (runs[2]);
}
