import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../log/logger.js';
import { formatKeyFile, writeKeyFile } from './key-file.js';
import { hashKey } from './key-hash.js';
import { KeyStore } from './key-store.js';
import { appliedAtLeast, keyFileVersion, readKeysApplied } from './keys-applied.js';

const dirs: string[] = [];
const stores: KeyStore[] = [];
afterEach(() => {
  for (const store of stores.splice(0)) store.stop();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function storeIn(options: { pollMs?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'harbor-key-store-'));
  dirs.push(dir);
  const path = join(dir, 'api-keys');
  const appliedFile = join(dir, 'keys-applied.json');
  const store = () => {
    const keys = new KeyStore({
      defaultKey: 'default-key-0123456789',
      path,
      pollMs: options.pollMs ?? 60_000,
      logger: createLogger('silent'),
      appliedFile,
    });
    stores.push(keys);
    return keys;
  };
  return { dir, path, appliedFile, store };
}

async function until(done: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('key grants', () => {
  it('stay as they are while the keys do not change, and follow a changed ship prefix or site', () => {
    const { path, store } = storeIn();
    const hash = hashKey('crane-key-0123456789');
    writeKeyFile(path, [{ name: 'crane', hash, shipPrefix: 'crane-' }]);
    const keys = store();
    const grant = keys.grant('crane-key-0123456789')!;
    expect(grant.principal).toEqual({ name: 'crane', shipPrefix: 'crane-' });
    expect(keys.renew(grant)).toBe(grant);
    writeKeyFile(path, [{ name: 'crane', hash, shipPrefix: 'crane-north-', site: 'Pier 4' }]);
    keys.reload();
    const renewed = keys.renew(grant)!;
    expect(renewed.principal).toEqual({ name: 'crane', shipPrefix: 'crane-north-', site: 'Pier 4' });
    expect(renewed.generation).toBe(keys.generation);
    expect(keys.renew(renewed)).toBe(renewed);
  });

  it('end with the key: revoked, or replaced by another key of the same name', () => {
    const { path, store } = storeIn();
    writeKeyFile(path, [
      { name: 'buoy-1', hash: hashKey('buoy-key-0123456789') },
      { name: 'buoy-2', hash: hashKey('buoy-two-0123456789') },
    ]);
    const keys = store();
    const one = keys.grant('buoy-key-0123456789')!;
    const two = keys.grant('buoy-two-0123456789')!;
    const fallback = keys.grant('default-key-0123456789')!;
    writeKeyFile(path, [{ name: 'buoy-2', hash: hashKey('buoy-new-0123456789') }]);
    keys.reload();
    expect(keys.renew(one)).toBeUndefined();
    expect(keys.renew(two)).toBeUndefined();
    expect(keys.authenticate('buoy-two-0123456789')).toBeUndefined();
    expect(keys.renew(fallback)?.principal).toEqual({ name: 'default' });
    expect(keys.grant('wrong-key-0123456789')).toBeUndefined();
  });

  it('tells its listeners after each load, with a higher generation', () => {
    const { path, store } = storeIn();
    const keys = store();
    const seen: number[] = [];
    const stop = keys.onChange(() => seen.push(keys.generation));
    writeKeyFile(path, [{ name: 'a', hash: hashKey('a-key-0123456789ab') }]);
    keys.reload();
    keys.reload();
    stop();
    keys.reload();
    expect(seen).toEqual([2, 3]);
  });
});

describe('noticing a changed key file', () => {
  it('applies a key file replaced by rename within milliseconds, without waiting for the poll', async () => {
    const { path, appliedFile, store } = storeIn({ pollMs: 60_000 });
    writeKeyFile(path, [{ name: 'buoy-1', hash: hashKey('buoy-key-0123456789') }]);
    const keys = store();
    keys.watch();
    const grant = keys.grant('buoy-key-0123456789')!;
    writeKeyFile(path, []);
    const written = keyFileVersion(path);
    const started = Date.now();
    await until(() => keys.renew(grant) === undefined);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(appliedAtLeast(readKeysApplied(appliedFile), path, written)).toBe(true);
  });

  it('applies a file edited in place, and each of several replacements in a row', async () => {
    const { path, store } = storeIn({ pollMs: 60_000 });
    writeKeyFile(path, []);
    const keys = store();
    keys.watch();
    writeFileSync(path, formatKeyFile([{ name: 'late', hash: hashKey('late-key-0123456789') }]));
    await until(() => keys.authenticate('late-key-0123456789') !== undefined);
    writeFileSync(path, formatKeyFile([]));
    await until(() => keys.authenticate('late-key-0123456789') === undefined);
    // The name is a new file after each rename: the watch follows it.
    for (let i = 0; i < 3; i++) {
      writeKeyFile(path, [{ name: `k${i}`, hash: hashKey(`key-${i}-0123456789abc`) }]);
      await until(() => keys.authenticate(`key-${i}-0123456789abc`) !== undefined);
    }
  });

  it('sees a file appear where there was none by the poll, and watches it from then on', async () => {
    const { dir } = storeIn();
    // A key file whose folder does not exist yet: nothing to watch, only the poll sees it come.
    const nested = join(dir, 'later', 'api-keys');
    const keys = new KeyStore({ defaultKey: 'default-key-0123456789', path: nested, pollMs: 50, logger: createLogger('silent') });
    stores.push(keys);
    keys.watch();
    mkdirSync(join(dir, 'later'));
    writeKeyFile(nested, [{ name: 'polled', hash: hashKey('polled-key-0123456789') }]);
    await until(() => keys.authenticate('polled-key-0123456789') !== undefined);
  });

  it('says which version of the file it applied, and a version is at least as new as itself only for its own path', () => {
    const { path, appliedFile, store } = storeIn();
    writeKeyFile(path, []);
    store();
    const applied = readKeysApplied(appliedFile);
    expect(applied).toMatchObject({ path, pid: process.pid });
    expect(appliedAtLeast(applied, path, keyFileVersion(path))).toBe(true);
    expect(appliedAtLeast(applied, `${path}-other`, keyFileVersion(path))).toBe(false);
    writeKeyFile(path, [{ name: 'n', hash: hashKey('n-key-0123456789abc') }]);
    expect(appliedAtLeast(applied, path, keyFileVersion(path))).toBe(false);
  });
});
