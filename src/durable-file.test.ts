import { mkdirSync, readFileSync, readdirSync, realpathSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../test/support/temp-dir.js';
import { fsyncPath, makeDirectoryDurably, replaceFileDurably } from './durable-file.js';

describe('durable files', () => {
  it('replaces a file whole, with exactly the mode asked for', () => {
    const dir = tempDir('durable');
    const path = join(dir, 'keys');
    writeFileSync(path, 'old', { mode: 0o644 });
    replaceFileDurably(path, 'new content', 0o600);
    expect(readFileSync(path, 'utf8')).toBe('new content');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['keys']);
  });

  it('keeps the old file and leaves nothing beside it when the replacement fails before its rename', () => {
    const dir = tempDir('durable');
    const path = join(dir, 'keys');
    writeFileSync(path, 'old');
    expect(() =>
      replaceFileDurably(path, 'new', 0o600, () => {
        throw new Error('no owner');
      }),
    ).toThrow('no owner');
    expect(readFileSync(path, 'utf8')).toBe('old');
    expect(readdirSync(dir)).toEqual(['keys']);
  });

  it('makes missing directories with their mode, and accepts one that is there', () => {
    const dir = join(tempDir('durable'), 'a', 'b');
    makeDirectoryDurably(dir, 0o700);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(() => makeDirectoryDurably(dir, 0o700)).not.toThrow();
  });

  it('makes a directory where the kernel resolves its path, and returns that real path', () => {
    const root = realpathSync(tempDir('durable'));
    mkdirSync(join(root, 'deep', 'inner'), { recursive: true });
    symlinkSync(join(root, 'deep', 'inner'), join(root, 'link'));
    // `link/..` is root/deep to the kernel, root to a textual normalisation.
    expect(makeDirectoryDurably(`${root}/link/../made/data`, 0o750)).toBe(join(root, 'deep', 'made', 'data'));
    expect(statSync(join(root, 'deep', 'made', 'data')).isDirectory()).toBe(true);
    expect(readdirSync(root).sort()).toEqual(['deep', 'link']);
  });

  it('throws for a path that is not there, as a missing name is no durable one', () => {
    expect(() => fsyncPath(join(tempDir('durable'), 'missing'))).toThrow(/ENOENT/);
  });
});
