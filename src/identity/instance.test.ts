import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { readBoard } from './board.js';
import { isInstanceId } from '../reading/site-id.js';
import { instanceFile, loadInstance, newInstanceId } from './instance.js';

/** A file system root with these files, for the board sources. */
function root(files: Record<string, string>): string {
  const dir = tempDir('board');
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return dir;
}

const PI = 'sys/firmware/devicetree/base/serial-number';

describe('the board', () => {
  it("is a Pi's serial first, then /proc/cpuinfo's, then the machine id, kept as a hash", () => {
    const both = root({ [PI]: '10000000abcdef01\0', 'etc/machine-id': 'f00dfeedf00dfeedf00dfeedf00dfeed\n' });
    const board = readBoard(both)!;
    expect(board.source).toBe(`/${PI}`);
    expect(board.hash).toMatch(/^[0-9a-f]{32}$/);
    expect(JSON.stringify(board)).not.toContain('abcdef01');
    expect(readBoard(root({ [PI]: '10000000abcdef01\0' }))).toEqual(board);
    expect(readBoard(root({ 'proc/cpuinfo': 'processor\t: 0\nSerial\t\t: 10000000abcdef01\nModel\t: Raspberry Pi 4\n' }))?.source).toBe(
      '/proc/cpuinfo',
    );
    // A serial of zeros (some boards, emulators) says nothing.
    expect(readBoard(root({ 'proc/cpuinfo': 'Serial\t\t: 0000000000000000\n', 'etc/machine-id': 'f00d\n' }))?.source).toBe(
      '/etc/machine-id',
    );
    expect(readBoard(root({}))).toBeUndefined();
  });

  it('tells two boards apart', () => {
    expect(readBoard(root({ [PI]: 'aaaa' }))!.hash).not.toBe(readBoard(root({ [PI]: 'bbbb' }))!.hash);
  });
});

describe('the instance', () => {
  const boardA = readBoard(root({ [PI]: '10000000aaaaaaaa' }));
  const boardB = readBoard(root({ [PI]: '10000000bbbbbbbb' }));

  it('is made at the first start, written to the data directory, and kept at the next', () => {
    const dataDir = tempDir('instance');
    const first = loadInstance(dataDir, boardA);
    expect(first.origin).toEqual({ kind: 'made', reason: 'first start' });
    expect(isInstanceId(first.instance.id)).toBe(true);
    expect(JSON.parse(readFileSync(instanceFile(dataDir), 'utf8'))).toEqual(first.instance);
    expect(statSync(instanceFile(dataDir)).mode & 0o777).toBe(0o640);
    expect(loadInstance(dataDir, boardA)).toEqual({ instance: first.instance, origin: { kind: 'kept' } });
  });

  it('is made anew when its data directory was made on another board: a cloned card', () => {
    const dataDir = tempDir('instance');
    const original = loadInstance(dataDir, boardA).instance;
    const clone = loadInstance(dataDir, boardB);
    expect(clone.origin).toEqual({ kind: 'renewed', previous: original.id });
    expect(clone.instance.id).not.toBe(original.id);
    expect(clone.instance.board).toBe(boardB!.hash);
    expect(loadInstance(dataDir, boardB).origin).toEqual({ kind: 'kept' });
  });

  it('is kept when no board can be read, and bound to the board once one can', () => {
    const dataDir = tempDir('instance');
    const made = loadInstance(dataDir, undefined).instance;
    expect(made.board).toBeUndefined();
    expect(loadInstance(dataDir, boardA)).toEqual({ instance: { ...made, board: boardA!.hash }, origin: { kind: 'kept' } });
    expect(loadInstance(dataDir, undefined).instance.id).toBe(made.id);
  });

  it('is made anew from a damaged file', () => {
    const dataDir = tempDir('instance');
    writeFileSync(instanceFile(dataDir), '{"id": "NOT AN ID"');
    expect(loadInstance(dataDir, boardA).origin).toEqual({ kind: 'made', reason: 'unreadable' });
  });

  it('ids are 16 characters of lower-case base32, different each time', () => {
    const ids = new Set(Array.from({ length: 1000 }, newInstanceId));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^[a-z2-7]{16}$/);
  });
});
