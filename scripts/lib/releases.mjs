// The releases CHANGELOG.md records: version, date, commit and queue file format, newest first.
// Tags do not travel with every clone; these lines do, so tools find a release's commit from the tree.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from './paths.mjs';

/** @typedef {{ version: string, date: string, commit: string, queueFormat: number }} Release */

/**
 * Parses a changelog: every `## X.Y.Z (date)` section with a `Commit: \`sha\`` line and a
 * "format N" in its first paragraph. A release section without its commit line is an error: it
 * would make the tools silently compare against an older release.
 * @param {string} text
 * @returns {Release[]}
 */
export function parseReleases(text) {
  const sections = text.split(/^## /m).slice(1);
  /** @type {Release[]} */
  const releases = [];
  for (const section of sections) {
    const heading = /^(\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)/.exec(section);
    if (heading === null) continue;
    const [, version = '', date = ''] = heading;
    const commit = /^Commit: `([0-9a-f]{40})`/m.exec(section)?.[1];
    if (commit === undefined) throw new Error(`CHANGELOG.md: release ${version} has no "Commit: \`<40 hex digits>\`" line`);
    const format = /format (\d+)/.exec(section)?.[1];
    if (format === undefined) throw new Error(`CHANGELOG.md: release ${version} names no queue file format`);
    releases.push({ version, date, commit, queueFormat: Number(format) });
  }
  return releases;
}

/** @returns {Release[]} the project's releases, newest first */
export function releases() {
  return parseReleases(readFileSync(join(projectRoot, 'CHANGELOG.md'), 'utf8'));
}

/** The newest recorded release: what the upgrade test and `bench --compare` take as "the previous one". */
export function previousRelease() {
  const newest = releases()[0];
  if (newest === undefined) throw new Error('CHANGELOG.md records no release');
  return newest;
}
