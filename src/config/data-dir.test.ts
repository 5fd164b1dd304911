import { mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { loadConfig } from './config.js';
import { resolveDataDir } from './data-dir.js';

describe('DATA_DIR', () => {
  const tree = () => {
    const root = realpathSync(tempDir('data-dir'));
    mkdirSync(join(root, 'volumes', 'disk'), { recursive: true });
    symlinkSync(join(root, 'volumes', 'disk'), join(root, 'link'));
    return root;
  };

  it('is resolved as the kernel resolves it: a link, then `..` from where the link leads', () => {
    const root = tree();
    expect(resolveDataDir(`${root}/link/../gateway`)).toBe(join(root, 'volumes', 'gateway'));
    expect(resolveDataDir(`${root}/link/./data/`)).toBe(join(root, 'volumes', 'disk', 'data'));
    // Parts that do not exist yet follow as written.
    expect(resolveDataDir(`${root}/link/new/deeper`)).toBe(join(root, 'volumes', 'disk', 'new', 'deeper'));
    expect(resolveDataDir(join(root, 'link'))).toBe(join(root, 'volumes', 'disk'));
  });

  it('is resolved in the configuration, and the default key file beside it', () => {
    const root = tree();
    const config = loadConfig({ DATA_DIR: `${root}/link/../gateway` });
    expect(config.dataDir).toBe(join(root, 'volumes', 'gateway'));
    expect(config.apiKeysFile).toBe(join(root, 'volumes', 'gateway', 'api-keys'));
  });
});
