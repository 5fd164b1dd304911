import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clockSynchronized } from './clock.js';

describe('clockSynchronized', () => {
  it('reads systemd-timesyncd: synchronised, not yet, or unknown without it', () => {
    const run = mkdtempSync(join(tmpdir(), 'harbor-clock-'));
    const dir = join(run, 'timesync');
    expect(clockSynchronized(dir)).toBeNull();
    mkdirSync(dir);
    expect(clockSynchronized(dir)).toBe(false);
    writeFileSync(join(dir, 'synchronized'), '');
    expect(clockSynchronized(dir)).toBe(true);
  });
});
