// Bundles the gateway for Node 20+: dist/gateway.mjs, the entry of both threads, and dist/chunks/,
// the modules it loads when it needs them. better-sqlite3 stays external: it is the one native
// module and must be installed for the target architecture next to the bundle.
import { rm, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkg = JSON.parse(await readFile(new URL('./package.json', import.meta.url), 'utf8'));

/** The bundle's esbuild options (test/unit/bundle-contents.test.ts builds with them in memory). @type {import('esbuild').BuildOptions} */
export const bundleOptions = {
  absWorkingDir: fileURLToPath(new URL('.', import.meta.url)),
  entryPoints: { gateway: 'src/main.ts' },
  outdir: 'dist',
  // What a module imports with import() is a chunk of its own, read only when imported: each thread
  // holds the source text of what it loaded, not of the whole gateway (the delivery thread none of
  // the console, a site without MQTT or Kafka none of theirs; docs/architecture.md, "What loads when").
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  // .mjs: ESM wherever the files are copied, with or without a package.json beside them.
  outExtension: { '.js': '.mjs' },
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
  // Bundled CommonJS dependencies call require(); give each file of the bundle one.
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);",
  },
  logLevel: 'warning',
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // Chunks are named by their content's hash: those of an earlier build would stay beside the new ones.
  await rm(new URL('./dist/chunks', import.meta.url), { recursive: true, force: true });
  await build(bundleOptions);
}
