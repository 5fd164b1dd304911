import { describe, expect, it } from 'vitest';
import { parseReleases, releases } from '../../scripts/lib/releases.mjs';

describe('releases recorded in CHANGELOG.md', () => {
  it('name every release with its commit and queue format, newest first', () => {
    const recorded = releases();
    expect(recorded.map((r) => r.version).slice(-4)).toEqual(['0.4.0', '0.3.0', '0.2.0', '0.1.0']);
    expect(recorded.at(-1)).toEqual({
      version: '0.1.0',
      date: '2026-11-21',
      commit: '9cf87a61ed99c8f9c72adb17c37d5442f4adac32',
      queueFormat: 1,
    });
    for (const release of recorded) expect(release.commit).toMatch(/^[0-9a-f]{40}$/);
  });

  it('refuse a release section without its commit line', () => {
    expect(() => parseReleases('# Changelog\n\n## Unreleased\n\n## 1.0.0 (2027-01-01)\n\nQueue file format 9.\n')).toThrow(
      /release 1.0.0 has no "Commit:/,
    );
  });

  it('skip the unreleased section', () => {
    const text = `## Unreleased\n\n- work\n\n## 1.0.0 (2027-01-01)\n\nCommit: \`${'a'.repeat(40)}\`.\n\nQueue file format 5.\n`;
    expect(parseReleases(text)).toEqual([{ version: '1.0.0', date: '2027-01-01', commit: 'a'.repeat(40), queueFormat: 5 }]);
  });
});
