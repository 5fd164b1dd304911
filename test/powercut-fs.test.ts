import { execFileSync } from 'node:child_process';
import {
  closeSync,
  constants,
  existsSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { buildPowercutFs, createPowercutDisk } from '../scripts/lib/powercut-fs.mjs';

type Disk = Awaited<ReturnType<typeof createPowercutDisk>>;
let disk: Disk | undefined;

afterEach(async () => {
  await disk?.remove();
  disk = undefined;
});

type Mount = Awaited<ReturnType<Disk['mount']>>;

/** A new disk, mounted; removed after the test. */
async function mountedDisk(options?: Parameters<typeof createPowercutDisk>[0]): Promise<Mount> {
  disk = await createPowercutDisk(options);
  return disk.mount();
}

function theDisk(): Disk {
  if (disk === undefined) throw new Error('no disk made yet');
  return disk;
}

/** Cuts the power and unmounts; answers what the cut did. */
async function cutAndUnmount(fs: Mount, options?: Parameters<Mount['cut']>[0]) {
  const report = await fs.cut(options);
  await fs.unmount();
  return report;
}

/** What a file of the backing directory holds, as a cut left it; undefined when there is none. */
function onDisk(name: string): string | undefined {
  const path = join(theDisk().backing, name);
  return existsSync(path) ? readFileSync(path, 'utf8') : undefined;
}

/** Writes at an offset through one descriptor, fsynced or not. */
function writeAt(path: string, data: Buffer | string, position: number, fsync: boolean) {
  withFd(path, existsSync(path) ? 'r+' : 'w+', (fd) => {
    writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data, 0, undefined, position);
    if (fsync) fsyncSync(fd);
  });
}

/** Runs fn on a descriptor of path, closed afterwards. */
function withFd(path: string, flags: string | number, fn: (fd: number) => void) {
  const fd = openSync(path, flags);
  try {
    fn(fd);
  } finally {
    closeSync(fd);
  }
}

function fsyncDir(path: string) {
  withFd(path, 'r', fsyncSync);
}

/** A file created, fsynced and made durable in its directory. */
function durableFile(dir: string, name: string, content: string) {
  writeAt(join(dir, name), content, 0, true);
  fsyncDir(dir);
}

describe('powercut-fs', () => {
  it('drops writes not fsynced on a cut and keeps fsynced ones, through a new mount', async () => {
    const fs = await mountedDisk();
    const path = join(fs.mountPoint, 'data');
    durableFile(fs.mountPoint, 'data', 'synced;');
    writeAt(path, 'lost', 7, false);
    expect(readFileSync(path, 'utf8')).toBe('synced;lost');

    const report = await cutAndUnmount(fs);
    const again = await theDisk().mount();

    expect(report).toMatchObject({ writes: 1, entries: 0 });
    expect(readFileSync(join(again.mountPoint, 'data'), 'utf8')).toBe('synced;');
  });

  it('fails every change after the cut, as a dead disk does', async () => {
    const fs = await mountedDisk();
    durableFile(fs.mountPoint, 'data', 'synced');
    await fs.cut();
    expect(() => writeAt(join(fs.mountPoint, 'data'), 'late', 0, false)).toThrow(/EIO/);
  });

  it('undoes a rename whose directory was not fsynced and keeps one whose directory was', async () => {
    const fs = await mountedDisk();
    durableFile(fs.mountPoint, 'a', 'A');
    durableFile(fs.mountPoint, 'b', 'B');
    renameSync(join(fs.mountPoint, 'a'), join(fs.mountPoint, 'a2'));
    fsyncDir(fs.mountPoint);
    renameSync(join(fs.mountPoint, 'b'), join(fs.mountPoint, 'a2'));

    await cutAndUnmount(fs);

    expect(onDisk('a2')).toBe('A');
    expect(onDisk('b')).toBe('B');
    expect(onDisk('a')).toBeUndefined();
  });

  it('loses a file created without a directory fsync even when the file was fsynced, and brings back an unlinked one', async () => {
    const fs = await mountedDisk();
    durableFile(fs.mountPoint, 'old', 'kept');
    writeAt(join(fs.mountPoint, 'new'), 'content', 0, true);
    unlinkSync(join(fs.mountPoint, 'old'));

    const report = await cutAndUnmount(fs);

    expect(report.entries).toBe(2);
    expect(onDisk('new')).toBeUndefined();
    expect(onDisk('old')).toBe('kept');
  });

  it('tears any unsynced write, not only the newest: whole sectors of it land, the rest keeps what was there', async () => {
    const torn = new Set<string>();
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const fs = await mountedDisk();
      const path = join(fs.mountPoint, 'page');
      durableFile(fs.mountPoint, 'page', 'o'.repeat(4096));
      writeAt(path, 'x'.repeat(4096), 0, false);
      writeAt(path, 'n'.repeat(4096), 0, false);

      const report = await cutAndUnmount(fs, { model: 'tear', seed });

      expect(report.torn).toMatch(/^page: [1-7] of 8 sectors of a write of 4096 bytes at offset 0$/);
      const sectors = onDisk('page')?.match(/.{512}/g) ?? [];
      expect(sectors.every((sector) => /^(o+|x+|n+)$/.test(sector))).toBe(true);
      expect(sectors.filter((sector) => sector[0] !== 'o').length).toBeGreaterThan(0);
      for (const sector of sectors) torn.add(sector[0]!);
      await theDisk().remove();
      disk = undefined;
    }
    // Over six seeds both writes were torn, the older one too.
    expect([...torn].sort()).toEqual(['n', 'o', 'x']);
  });

  it('overwrites and shrinks a file through a write-only descriptor, and a cut undoes both', async () => {
    const fs = await mountedDisk();
    const path = join(fs.mountPoint, 'data');
    durableFile(fs.mountPoint, 'data', '0123456789');
    withFd(path, constants.O_WRONLY, (fd) => {
      writeSync(fd, Buffer.from('ab'), 0, 2, 2);
      ftruncateSync(fd, 4);
    });
    expect(readFileSync(path, 'utf8')).toBe('01ab');

    await cutAndUnmount(fs);

    expect(onDisk('data')).toBe('0123456789');
  });

  it('makes nothing durable by sync or syncfs, which FUSE does not pass on', async () => {
    const fs = await mountedDisk();
    durableFile(fs.mountPoint, 'data', 'synced');
    writeAt(join(fs.mountPoint, 'data'), 'SYNCED', 0, false);
    writeAt(join(fs.mountPoint, 'new'), 'never fsynced', 0, false);
    execFileSync('sync');
    execFileSync('sync', ['-f', join(fs.mountPoint, 'data')]);

    await cutAndUnmount(fs);

    expect(onDisk('data')).toBe('synced');
    expect(onDisk('new')).toBeUndefined();
  });

  it('loses a new directory whose parent was not fsynced, though everything inside it was', async () => {
    const fs = await mountedDisk();
    mkdirSync(join(fs.mountPoint, 'site', 'data'), { recursive: true });
    durableFile(join(fs.mountPoint, 'site', 'data'), 'queue.db', 'committed');
    fsyncDir(join(fs.mountPoint, 'site'));

    await cutAndUnmount(fs);

    expect(onDisk('site')).toBeUndefined();
  });

  it('fails an fsync with EIO when set to, drops its writes, and lets a later fsync succeed without them', async () => {
    // ext4's entries, so the fsync that succeeds makes the file's name durable.
    const fs = await mountedDisk({ entries: 'ext4', fsyncEio: 1, seed: 7 });
    const path = join(fs.mountPoint, 'data');
    writeAt(path, 'lost', 0, false);
    withFd(path, 'r+', (fd) => {
      expect(() => fsyncSync(fd)).toThrow(/EIO/);
      fsyncSync(fd);
    });
    expect(readFileSync(path, 'utf8')).toBe('lost');

    await cutAndUnmount(fs);

    expect(onDisk('data')).toBe('');
  });

  it('fails a write that grows a file with ENOSPC when set to', async () => {
    const fs = await mountedDisk({ enospc: 1 });
    expect(() => writeAt(join(fs.mountPoint, 'data'), 'more', 0, false)).toThrow(/ENOSPC/);
  });

  it('loses what a lying flush acknowledged when the cut comes before its delay', async () => {
    const fs = await mountedDisk({ lyingFlushMs: 60_000 });
    durableFile(fs.mountPoint, 'data', 'acknowledged');

    await cutAndUnmount(fs);

    expect(onDisk('data')).toBeUndefined();
  });

  it('keeps an arbitrary seeded subset on a subset cut, and says how much it kept', async () => {
    const fs = await mountedDisk();
    durableFile(fs.mountPoint, 'data', '');
    for (let i = 0; i < 16; i++) writeAt(join(fs.mountPoint, 'data'), String(i % 10).repeat(512), i * 512, false);

    const report = await cutAndUnmount(fs, { model: 'subset', seed: 3 });

    expect(report).toMatchObject({ model: 'subset', seed: '3', writes: 16 });
    expect(report.keep).toBeGreaterThan(0);
    const size = readFileSync(join(theDisk().backing, 'data')).length;
    expect(size % 512).toBe(0);
    expect(report.kept).toBeLessThanOrEqual(16);
  });

  it('keeps a file written whole, fsynced and renamed into place with a directory fsync', async () => {
    const fs = await mountedDisk();
    writeAt(join(fs.mountPoint, 'config.tmp'), 'v2', 0, true);
    renameSync(join(fs.mountPoint, 'config.tmp'), join(fs.mountPoint, 'config'));
    fsyncDir(fs.mountPoint);

    await cutAndUnmount(fs);

    expect(onDisk('config')).toBe('v2');
  });

  it('keeps everything after a writeback, as the kernel does with old dirty data', async () => {
    const fs = await mountedDisk();
    writeAt(join(fs.mountPoint, 'startup'), 'written long ago', 0, false);
    await fs.writeBack();
    writeAt(join(fs.mountPoint, 'startup'), 'WRITTEN', 0, false);

    await cutAndUnmount(fs);

    expect(onDisk('startup')).toBe('written long ago');
  });

  it('commits every earlier entry change with any fsync when it models ext4', async () => {
    const fs = await mountedDisk({ entries: 'ext4' });
    durableFile(fs.mountPoint, 'a', 'A');
    renameSync(join(fs.mountPoint, 'a'), join(fs.mountPoint, 'renamed'));
    writeAt(join(fs.mountPoint, 'other'), 'fsynced', 0, true);
    renameSync(join(fs.mountPoint, 'renamed'), join(fs.mountPoint, 'later'));

    await cutAndUnmount(fs);

    expect(onDisk('renamed')).toBe('A');
    expect(onDisk('other')).toBe('fsynced');
    expect(onDisk('later')).toBeUndefined();
  });

  it('makes changes durable once they are older than its writeback age, as the kernel does', async () => {
    const fs = await mountedDisk({ writebackAfterMs: 200, writebackEveryMs: 50 });
    writeAt(join(fs.mountPoint, 'dirty'), 'written back by age', 0, false);
    while ((await fs.status()).changes > 0 || (await fs.status()).entries > 0) await new Promise((r) => setTimeout(r, 50));

    await cutAndUnmount(fs);

    expect(onDisk('dirty')).toBe('written back by age');
  });

  it('keeps young changes volatile through writeback-older', async () => {
    const fs = await mountedDisk();
    durableFile(fs.mountPoint, 'data', 'synced');
    writeAt(join(fs.mountPoint, 'data'), 'SYNCED', 0, false);

    expect(await fs.writeBackOlder(3_600_000)).toMatchObject({ files: 0, changes: 0, entries: 0 });
    await cutAndUnmount(fs);

    expect(onDisk('data')).toBe('synced');
  });

  it('passes its Go tests (each model: entries per directory, tears, subsets, fsync errors, ENOSPC, lying flushes, writeback by age)', () => {
    buildPowercutFs();
    const output = execFileSync('go', ['test', './...'], {
      cwd: join(projectRoot, 'scripts', 'powercut-fs'),
      env: { ...process.env, GOFLAGS: '-mod=mod' },
      encoding: 'utf8',
    });
    expect(output).toMatch(/^ok\s/m);
  });
});
