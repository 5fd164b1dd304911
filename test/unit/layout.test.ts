import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');

/** What the top level holds: the layout the README and docs/architecture.md describe, nothing else. */
const TOP_LEVEL = [
  '.ci',
  '.dockerignore',
  '.env.example',
  '.git',
  '.gitignore',
  '.npmrc',
  'CHANGELOG.md',
  'Dockerfile',
  'README.md',
  'appliance',
  'bench',
  'biome.json',
  'build.mjs',
  'compose.yaml',
  'docs',
  'grafana',
  'package-lock.json',
  'package.json',
  'scripts',
  'src',
  'systemd',
  'test',
  'tsconfig.json',
  'vitest.config.ts',
];

/** Top-level names .gitignore leaves out of the tree (build output, caches, local data). */
function ignoredTopLevel(): Set<string> {
  const names = readFileSync(join(root, '.gitignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#') && !line.includes('*') && !/\/./.test(line));
  return new Set(names.map((line) => line.replace(/\/$/, '')));
}

/** Entries at the top level that the layout does not name: a stray file from a merge, a forgotten output. */
function unexpectedTopLevel(entries: readonly string[], ignored: ReadonlySet<string>): string[] {
  return entries.filter((name) => !TOP_LEVEL.includes(name) && !ignored.has(name)).sort();
}

describe('the top level', () => {
  it('holds only what the layout names', () => {
    expect(unexpectedTopLevel(readdirSync(root), ignoredTopLevel())).toEqual([]);
  });

  it('names a stray file, and lets ignored build output be', () => {
    expect(unexpectedTopLevel(['src', 'good.txt', 'dist', 'node_modules'], ignoredTopLevel())).toEqual(['good.txt']);
  });
});
