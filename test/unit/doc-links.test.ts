import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');

/** README.md and every Markdown file under docs/. */
function documents(): string[] {
  const found = [join(root, 'README.md')];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (entry.endsWith('.md')) found.push(path);
    }
  };
  walk(join(root, 'docs'));
  return found;
}

/** The lines of a Markdown file outside fenced code blocks. */
function prose(path: string): string[] {
  let fenced = false;
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => {
      if (line.startsWith('```')) fenced = !fenced;
      return !fenced && !line.startsWith('```');
    });
}

/** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function headingAnchors(path: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of prose(path)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replaceAll(' ', '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Relative links `[text](target)` outside code: web and mail addresses are not checked. */
function relativeLinks(path: string): string[] {
  const links: string[] = [];
  for (const line of prose(path)) {
    const withoutCode = line.replace(/`[^`]*`/g, '');
    for (const match of withoutCode.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (!/^[a-z]+:/i.test(target)) links.push(target);
    }
  }
  return links;
}

describe('links in the README and docs/', () => {
  it.each(documents().map((path) => [relative(root, path), path]))('%s: every relative link and anchor resolves', (_name, path) => {
    const broken: string[] = [];
    for (const link of relativeLinks(path)) {
      const [file, anchor] = link.split('#') as [string, string | undefined];
      const target = file === '' ? path : join(dirname(path), file);
      if (!existsSync(target)) broken.push(`${link}: no such file`);
      else if (anchor !== undefined && target.endsWith('.md') && !headingAnchors(target).has(anchor))
        broken.push(`${link}: no heading with that anchor`);
    }
    expect(broken).toEqual([]);
  });

  it('reads anchors as GitHub makes them', () => {
    const anchors = headingAnchors(join(root, 'docs', 'guarantees.md'));
    expect(anchors).toContain('keys-and-brute-force');
    expect(anchors).toContain('power-cuts');
  });
});
