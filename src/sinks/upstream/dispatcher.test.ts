import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../../test/support/temp-dir.js';
import { trustedCas } from './dispatcher.js';

describe('trustedCas', () => {
  const dir = tempDir('upstream-ca');
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('trusts the configured CA file alone', () => {
    expect(trustedCas(file('ca.pem', 'CONFIGURED'), [file('system.pem', 'SYSTEM')])).toBe('CONFIGURED');
  });

  it("trusts the first system bundle found, so the operator's own CAs count", () => {
    expect(trustedCas(undefined, [join(dir, 'missing.pem'), file('bundle.pem', 'BUNDLE')])).toBe('BUNDLE');
  });

  it("falls back to Node's built-in list without a system bundle", () => {
    expect(trustedCas(undefined, [join(dir, 'missing.pem')])).toBeUndefined();
  });
});
