import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');

const sources = (dir: string): string[] =>
  readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sources(path);
    return /\.(ts|mjs|js)$/.test(entry.name) ? [path] : [];
  });

/** Every relative module a file imports (statically, dynamically or in a JSDoc type), repository-relative. */
const importsOf = (file: string): string[] =>
  [...readFileSync(join(root, file), 'utf8').matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^import\s*)'(\.{1,2}\/[^']+)'/gm)].map((m) =>
    relative(root, resolve(dirname(join(root, file)), m[1]!)),
  );

/** Imports of `dirs` that break `allowed`, as "file → module". */
function violations(dirs: string[], allowed: (module: string) => boolean): string[] {
  return dirs.flatMap((dir) =>
    sources(dir).flatMap((file) =>
      importsOf(file)
        .filter((module) => !allowed(module))
        .map((module) => `${file} → ${module}`),
    ),
  );
}

const within = (module: string, dir: string) => module.startsWith(`${dir}/`);

describe('tooling imports one way', () => {
  it('finds the imports it checks', () => {
    expect(importsOf('test/questdb-outage.test.ts')).toContain('scripts/lib/questdb.mjs');
    expect(importsOf('bench/run.mjs')).toContain('scripts/lib/questdb-sql.mjs');
  });

  it('test/, bench/, scripts/faults/ and appliance/ take tooling from scripts/lib/ only', () => {
    const tooling = (module: string) => !within(module, 'scripts') || within(module, 'scripts/lib') || within(module, 'scripts/faults');
    expect(violations(['test', 'bench', 'scripts/faults', 'appliance'], tooling)).toEqual([]);
  });

  it('bench/ never imports test/', () => {
    expect(violations(['bench'], (module) => !within(module, 'test'))).toEqual([]);
  });

  it('test/ never imports bench/ or scripts/faults/', () => {
    expect(violations(['test'], (module) => !within(module, 'bench') && !within(module, 'scripts/faults'))).toEqual([]);
  });

  it('scripts/lib/ imports none of its users', () => {
    const users = ['test', 'bench', 'scripts/faults', 'appliance'];
    expect(violations(['scripts/lib'], (module) => !users.some((dir) => within(module, dir)))).toEqual([]);
  });
});
