import { build, type Metafile, type OutputFile } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleOptions } from '../build.mjs';

let metafile: Metafile;
let outputFiles: OutputFile[];
beforeAll(async () => {
  ({ metafile, outputFiles } = await build({ ...bundleOptions, write: false, metafile: true, sourcemap: false, legalComments: 'none' }));
});

/** The source modules that contribute code to `outputs` (zod's locale index contributes an empty initialiser). */
const inputsOf = (outputs: Iterable<string>): string[] =>
  [...outputs].flatMap((output) =>
    Object.entries(metafile.outputs[output]?.inputs ?? {})
      .filter(([, input]) => input.bytesInOutput > 0)
      // node_modules may be a link to another checkout's: the package path is what counts.
      .map(([path]) => path.replace(/^.*?node_modules\//, 'node_modules/')),
  );

/** The output whose entry (the bundle's, or a module imported with import()) is `source`. */
const outputOf = (source: string): string => {
  const output = Object.keys(metafile.outputs).find((o) => metafile.outputs[o]?.entryPoint === source);
  if (output === undefined) throw new Error(`no chunk of its own for ${source}`);
  return output;
};

/** `output` and every chunk it imports statically: what is read and run when it is imported. */
function loadedWith(output: string, seen = new Set<string>()): Set<string> {
  if (seen.has(output)) return seen;
  seen.add(output);
  for (const imported of metafile.outputs[output]?.imports ?? [])
    if (imported.kind === 'import-statement' && !imported.external) loadedWith(imported.path, seen);
  return seen;
}

// Both threads hold the source text of what they load, so what the bundle carries and never runs
// costs memory; zod's index re-exports every locale (44 of them, 300 KB); the gateway imports zod as
// a namespace (`import * as z`), which lets esbuild keep only what it uses: English, zod's default, alone.
describe('the bundle', () => {
  it('carries zod with its English messages only', () => {
    const inputs = inputsOf(Object.keys(metafile.outputs));
    expect(inputs.some((input) => input.includes('node_modules/zod/'))).toBe(true);
    const locales = inputs.filter((input) => /node_modules\/zod\/.*\/locales\/(?!index\.js$)/.test(input));
    expect(locales).toEqual(['node_modules/zod/v4/locales/en.js']);
  });

  // What each thread reads at its start is the entry and the chunks it imports statically; an
  // optional part is in a chunk of its own, read when the gateway imports it (src/gateway.ts).
  const optional = {
    console: /^src\/console\//,
    mqtt: /^src\/mqtt\/|node_modules\/mqtt-packet\//,
    // The Kafka sink's code and client; the words /status describes its settings with are the spec's.
    kafka: /node_modules\/@platformatic\/kafka\/|^src\/sinks\/kafka\/(?!describe-kafka\.ts$)/,
    catalogueParser: /node_modules\/yaml\/|^src\/catalogue\/catalogue-file\.ts$/,
    fleetReport: /^src\/health\/fleet-reporter\.ts$|^src\/sinks\/upstream\/site-report\.ts$/,
    commands: /^src\/cli\/.*-command\.ts$/,
  };

  it('starts the gateway (serve) without any optional part, each loaded by an import() of its own', () => {
    const serve = inputsOf(loadedWith(outputOf('src/cli/index.ts'), loadedWith('dist/gateway.mjs')));
    expect(serve).toContain('src/gateway.ts');
    for (const [part, pattern] of Object.entries(optional))
      expect(
        serve.filter((input) => pattern.test(input)),
        part,
      ).toEqual([]);
    // Each is in the bundle all the same (a part renamed would make the test above pass for nothing).
    const bundle = inputsOf(Object.keys(metafile.outputs));
    for (const pattern of Object.values(optional)) expect(bundle.some((input) => pattern.test(input))).toBe(true);
  });

  it('starts the delivery thread without the ingest side (no console, HTTP server, MQTT, settings or commands) or Kafka', () => {
    const delivery = inputsOf(loadedWith(outputOf('src/sinks/delivery-worker.ts'), loadedWith('dist/gateway.mjs')));
    expect(delivery).toContain('src/sinks/sink-loop.ts');
    const ingestSide =
      /^src\/(console|http|mqtt|cli|config|catalogue|audit)\/|^src\/gateway\.ts$|node_modules\/(hono|@hono|zod|yaml|node-cron)\//;
    expect(delivery.filter((input) => ingestSide.test(input) || optional.kafka.test(input))).toEqual([]);
  });

  // On Node 20 the first AsyncLocalStorage.run() enables promise hooks for the rest of the process:
  // every device request's promises would cost about three times as much after one console page.
  it('never takes AsyncLocalStorage from node:async_hooks, so rendering a console page slows no request', () => {
    const takes =
      /"node:async_hooks"\)\?\.AsyncLocalStorage|AsyncLocalStorage[^=;]*\}\s*=\s*__require\("node:async_hooks"\)|import\s*\{[^}]*AsyncLocalStorage[^}]*\}\s*from\s*"node:async_hooks"/;
    const files = outputFiles.filter((file) => file.path.endsWith('.mjs'));
    expect(files.length).toBeGreaterThan(1);
    expect(files.filter((file) => takes.test(file.text)).map((file) => file.path)).toEqual([]);
    // The console's renderer is in the bundle, its probe for one emptied (build.mjs).
    expect(files.some((file) => file.text.includes('loadAsyncLocalStorage'))).toBe(true);
  });
});
