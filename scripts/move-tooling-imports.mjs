// Rewrites imports of the tooling modules that moved into scripts/lib/ (one shared tooling
// library), in every file of test/, bench/, scripts/ and appliance/. Idempotent: run it after
// merging a branch that still imports the old paths, then `npm run format`.
//   node scripts/move-tooling-imports.mjs
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { projectRoot } from './lib/paths.mjs';

/** Old module → new module, and exports renamed on the way. @type {Record<string, { to: string, renamed?: Record<string, string> }>} */
const MOVED = {
  'scripts/gateway-process.mjs': { to: 'scripts/lib/gateway-process.mjs' },
  'scripts/node-options.mjs': { to: 'scripts/lib/node-options.mjs' },
  'scripts/compose-client.mjs': { to: 'scripts/lib/compose-client.mjs' },
  'scripts/apt.mjs': { to: 'scripts/lib/apt.mjs' },
  'scripts/faults/crash-consistency.mjs': { to: 'scripts/lib/crash-consistency.mjs' },
  'test/support/grafana-expand.mjs': { to: 'scripts/lib/grafana-expand.mjs' },
  'bench/lib/stats.mjs': { to: 'scripts/lib/stats.mjs' },
  'bench/lib/proc.mjs': { to: 'scripts/lib/proc.mjs' },
  'bench/lib/readings.mjs': { to: 'scripts/lib/readings.mjs' },
  'bench/lib/questdb-sql.mjs': { to: 'scripts/lib/questdb-sql.mjs', renamed: { waitWalApplied: 'walApplied' } },
};
/** scripts/questdb.mjs is now a command only; its exports went to three modules. @type {Record<string, Record<string, string>>} */
const SPLIT = {
  'scripts/questdb.mjs': { projectRoot: 'scripts/lib/paths.mjs', cacheDir: 'scripts/lib/paths.mjs', freePort: 'scripts/lib/ports.mjs', '*': 'scripts/lib/questdb.mjs' },
};

const specifier = (/** @type {string} */ file, /** @type {string} */ target) => {
  const path = relative(dirname(file), join(projectRoot, target));
  return path.startsWith('.') ? path : `./${path}`;
};
const moduleOf = (/** @type {string} */ file, /** @type {string} */ spec) => (spec.startsWith('.') ? relative(projectRoot, resolve(dirname(file), spec)) : undefined);

/** @param {string} file @param {string} text */
export function rewrite(file, text) {
  let out = text.replace(/(import|export)(\s+type)?\s*\{([^}]*)\}\s*from\s*'([^']+)';/g, (whole, verb, type, names, spec) => {
    const split = SPLIT[moduleOf(file, spec) ?? ''];
    if (split === undefined) return whole;
    /** @type {Map<string, string[]>} */
    const groups = new Map();
    for (const name of names.split(',').map((/** @type {string} */ n) => n.trim()).filter(Boolean)) {
      const bare = name.replace(/^type\s+/, '').split(/\s+as\s+/)[0];
      const target = /** @type {string} */ (split[bare ?? ''] ?? split['*']);
      groups.set(target, [...(groups.get(target) ?? []), name]);
    }
    return [...groups].map(([target, list]) => `${verb}${type ?? ''} { ${list.join(', ')} } from '${specifier(file, target)}';`).join('\n');
  });
  /** @type {Record<string, string>} */
  const renames = {};
  out = out.replace(/(from\s*|import\(\s*)'([^']+)'/g, (whole, lead, spec) => {
    const moved = MOVED[moduleOf(file, spec) ?? ''];
    if (moved === undefined) return whole;
    Object.assign(renames, moved.renamed);
    return `${lead}'${specifier(file, moved.to)}'`;
  });
  for (const [from, to] of Object.entries(renames)) out = out.replace(new RegExp(`\\b${from}\\b`, 'g'), to);
  return out;
}

/** @param {string} dir @returns {string[]} */
const sources = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sources(path);
    return /\.(ts|mjs|js)$/.test(entry.name) ? [path] : [];
  });

for (const file of ['test', 'bench', 'scripts', 'appliance'].flatMap((dir) => sources(join(projectRoot, dir)))) {
  const text = readFileSync(file, 'utf8');
  const out = rewrite(file, text);
  if (out !== text) {
    writeFileSync(file, out);
    process.stdout.write(`${relative(projectRoot, file)}\n`);
  }
}
