import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// Readings flow http → reading → queue → sinks → questdb (and the other destinations). Each layer may import only what this
// table lists; config, log, health and stats sit beside the flow, and gateway.ts wires everything.
// A directory or root module missing here fails the test until it is given its place.
const MAY_IMPORT: Record<string, readonly string[]> = {
  reading: [],
  queue: ['reading', 'version', 'durable-file'],
  keys: ['reading', 'durable-file'],
  audit: [],
  tls: ['durable-file'],
  questdb: [],
  sinks: ['queue', 'questdb', 'reading', 'log', 'config', 'stats'],
  health: ['queue', 'questdb', 'keys', 'stats'],
  catalogue: ['questdb'],
  http: ['reading', 'keys', 'tls', 'queue', 'health', 'claims', 'stats', 'durable-file', 'address-host'],
  console: [
    'config',
    'reading',
    'keys',
    'queue',
    'questdb',
    'health',
    'catalogue',
    'stats',
    'version',
    'audit',
    'durable-file',
    'address-host',
  ],
  mqtt: ['config', 'reading', 'keys', 'tls', 'queue', 'http', 'stats'],
  config: [],
  log: [],
  stats: [],
  version: [],
  'durable-file': [],
  'address-host': [],
  identity: ['durable-file', 'reading'],
  claims: [],
  gateway: [
    'config',
    'reading',
    'keys',
    'tls',
    'queue',
    'questdb',
    'sinks',
    'health',
    'catalogue',
    'http',
    'console',
    'mqtt',
    'identity',
    'claims',
    'stats',
    'version',
    'audit',
  ],
  cli: ['config', 'log', 'keys', 'tls', 'queue', 'sinks', 'catalogue', 'claims', 'gateway', 'version', 'audit'],
  main: ['cli', 'sinks'],
};

const SRC = import.meta.dirname;

/** The layer of a source file: its directory under src/, or its own name for a root module. */
function layerOf(file: string): string {
  const [first, ...rest] = relative(SRC, file).split('/');
  return rest.length === 0 ? first!.replace(/\.ts$/, '') : first!;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

interface SourceFile {
  path: string;
  text: string;
}

/** Relative imports, static and dynamic, as source files they name. */
function importsOf({ path, text }: SourceFile): string[] {
  const specifiers = [...text.matchAll(/(?:from\s+|import\s*\(\s*)'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
  return specifiers.map((s) => resolve(dirname(path), s.replace(/\.js$/, '.ts')));
}

/** Every import that crosses into a layer its own layer may not use, as "from → to (file)". */
function layerViolations(files: readonly SourceFile[]): string[] {
  const violations: string[] = [];
  for (const file of files) {
    const from = layerOf(file.path);
    const allowed = MAY_IMPORT[from];
    if (allowed === undefined) {
      violations.push(`${relative(SRC, file.path)}: layer "${from}" is not in the layer table`);
      continue;
    }
    for (const target of importsOf(file)) {
      const to = layerOf(target);
      if (to !== from && !allowed.includes(to))
        violations.push(`${from} → ${to} (${relative(SRC, file.path)} imports ${relative(SRC, target)})`);
    }
  }
  return violations;
}

describe('layers', () => {
  it('every import follows the layer table', () => {
    expect(layerViolations(sourceFiles(SRC).map((path) => ({ path, text: readFileSync(path, 'utf8') })))).toEqual([]);
  });

  it('the layer table has no cycle', () => {
    const visiting = new Set<string>();
    const done = new Set<string>();
    const visit = (layer: string, path: string[]): void => {
      if (done.has(layer)) return;
      if (visiting.has(layer)) throw new Error(`cycle: ${[...path, layer].join(' → ')}`);
      visiting.add(layer);
      for (const next of MAY_IMPORT[layer] ?? []) visit(next, [...path, layer]);
      visiting.delete(layer);
      done.add(layer);
    };
    for (const layer of Object.keys(MAY_IMPORT)) visit(layer, []);
  });

  it('reports an import against the flow and a layer without a place, naming the file', () => {
    const files = [
      { path: join(SRC, 'queue', 'late.ts'), text: "import { createApp } from '../http/app.js';" },
      { path: join(SRC, 'health', 'lazy.ts'), text: "const { SinkLoop } = await import('../sinks/sink-loop.js');" },
      { path: join(SRC, 'sinks', 'fine.ts'), text: "import { QuestDbHttp } from '../questdb/questdb-http.js';" },
      { path: join(SRC, 'sideways', 'new.ts'), text: '' },
    ];
    expect(layerViolations(files)).toEqual([
      'queue → http (queue/late.ts imports http/app.ts)',
      'health → sinks (health/lazy.ts imports sinks/sink-loop.ts)',
      'sideways/new.ts: layer "sideways" is not in the layer table',
    ]);
  });
});
