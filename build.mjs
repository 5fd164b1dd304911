// Bundles the gateway for Node 20+: dist/gateway.mjs, the entry of both threads, and dist/chunks/,
// the modules it loads when it needs them. better-sqlite3 stays external: it is the one native
// module and must be installed for the target architecture next to the bundle.
import { rm, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkg = JSON.parse(await readFile(new URL('./package.json', import.meta.url), 'utf8'));

/**
 * hono/jsx renders each page inside an AsyncLocalStorage when the runtime has one, for contexts read
 * after an await in async components (the console has none). On Node 20 its first run enables
 * promise hooks for good, and every promise of the process, each device request's among them, costs
 * about three times as much from the first console page on. Without it, hono/jsx renders with its own
 * synchronous store, which serves components that do not await.
 * @type {import('esbuild').Plugin}
 */
const jsxWithoutAsyncHooks = {
  name: 'jsx-without-async-hooks',
  setup(build) {
    build.onLoad({ filter: /[\\/]hono[\\/]dist[\\/]jsx[\\/]context\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const probe = /global\.process\?\.getBuiltinModule\?\.\("node:async_hooks"\)\?\.AsyncLocalStorage/;
      if (!probe.test(source)) throw new Error(`${args.path}: hono/jsx no longer probes for AsyncLocalStorage as build.mjs expects`);
      return {
        contents: source
          .replace(probe, 'undefined')
          .replace(/global\.process\?\.mainModule\?\.require\?\.\("node:async_hooks"\)\?\.AsyncLocalStorage/, 'undefined'),
        loader: 'js',
      };
    });
  },
};

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
  plugins: [jsxWithoutAsyncHooks],
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // Chunks are named by their content's hash: those of an earlier build would stay beside the new ones.
  await rm(new URL('./dist/chunks', import.meta.url), { recursive: true, force: true });
  await build(bundleOptions);
}
