import { describe, expect, it } from 'vitest';
import { formatKeyFile, parseKeyFile } from './key-file.js';
import { generateKey, hashKey, keyMatches } from './key-hash.js';

describe('key hashes', () => {
  it('match only the key they were made from, and differ for the same key (salted)', () => {
    const key = generateKey();
    const hash = hashKey(key);
    expect(keyMatches(hash, key)).toBe(true);
    expect(keyMatches(hash, `${key}x`)).toBe(false);
    expect(keyMatches(hash, key.slice(1))).toBe(false);
    expect(hashKey(key)).not.toBe(hash);
    expect(hash).not.toContain(key);
  });

  it('generates distinct keys of 192 bits', () => {
    const keys = new Set(Array.from({ length: 100 }, generateKey));
    expect(keys.size).toBe(100);
    for (const key of keys) expect(Buffer.from(key, 'base64url')).toHaveLength(24);
  });
});

describe('key file', () => {
  it('round-trips entries and skips bad lines naming them', () => {
    const good = [
      { name: 'buoy-1', hash: hashKey('a') },
      { name: 'crane', hash: hashKey('b'), shipPrefix: 'crane-' },
    ];
    expect(parseKeyFile(formatKeyFile(good))).toEqual({ entries: good, problems: [] });
    const text = [
      formatKeyFile(good),
      'bad name! x',
      `default ${hashKey('c')}`,
      `buoy-1 ${hashKey('d')}`,
      'mast not-a-hash',
      `mast ${hashKey('e')} prefix extra`,
      '   ',
      '# a comment',
    ].join('\n');
    const parsed = parseKeyFile(text);
    expect(parsed.entries).toEqual(good);
    expect(parsed.problems.map((p) => p.split(':')[0])).toEqual(['line 5', 'line 6', 'line 7', 'line 8', 'line 9']);
    expect(parsed.problems.join('\n')).toMatch(/reserved for API_KEY[\s\S]*used twice[\s\S]*key hash[\s\S]*optional ship_id prefix/);
  });

  it('keeps a key bound to a site, any letters and spaces percent-encoded in one field, with or without a ship prefix', () => {
    const entries = [
      { name: 'pier-7', hash: hashKey('a'), site: 'Hafen Süd 7' },
      { name: 'crane', hash: hashKey('b'), shipPrefix: 'crane-', site: 'pier 7' },
    ];
    const text = formatKeyFile(entries);
    expect(text).toContain(' site=Hafen%20S%C3%BCd%207\n');
    expect(parseKeyFile(text)).toEqual({ entries, problems: [] });
    const bad = parseKeyFile(
      [`a ${hashKey('c')} site=%FF`, `b ${hashKey('d')} site=x site=y`, `c ${hashKey('e')} site=%20padded`].join('\n'),
    );
    expect(bad.entries).toEqual([]);
    expect(bad.problems).toEqual([
      'line 1: the site is not a valid site id',
      'line 2: expected name, hash, an optional ship_id prefix and an optional site=…',
      'line 3: the site is not a valid site id',
    ]);
  });
});
