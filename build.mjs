// Bundles the gateway into one ESM file for Node 20+. better-sqlite3 stays external: it is the one
// native module and must be installed for the target architecture next to the bundle.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkg = JSON.parse(await readFile(new URL('./package.json', import.meta.url), 'utf8'));

/** The bundle's esbuild options (test/unit/bundle-contents.test.ts builds with them in memory). @type {import('esbuild').BuildOptions} */
export const bundleOptions = {
  absWorkingDir: fileURLToPath(new URL('.', import.meta.url)),
  entryPoints: ['src/main.ts'],
  outfile: 'dist/gateway.mjs',
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  external: ['better-sqlite3'],
  // Whitespace and syntax only: a smaller file to keep in memory, identifiers left readable in stack traces.
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: 'linked',
  legalComments: 'linked',
  define: { __GATEWAY_VERSION__: JSON.stringify(pkg.version) },
  // Bundled CommonJS dependencies call require(); give the ESM bundle one.
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);",
  },
  logLevel: 'warning',
};

if (process.argv[1] === fileURLToPath(import.meta.url)) await build(bundleOptions);
