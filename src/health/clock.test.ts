import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clockSynchronized } from './clock.js';
import { tempDir } from '../../test/support/temp-dir.js';

describe('clockSynchronized', () => {
  it('reads systemd-timesyncd: synchronised, not yet, or unknown without it', () => {
    const run = tempDir('clock');
    const dir = join(run, 'timesync');
    expect(clockSynchronized(dir)).toBeNull();
    mkdirSync(dir);
    expect(clockSynchronized(dir)).toBe(false);
    writeFileSync(join(dir, 'synchronized'), '');
    expect(clockSynchronized(dir)).toBe(true);
  });
});
