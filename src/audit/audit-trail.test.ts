import { existsSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../log/logger.js';
import { auditInputSchema, entryOf } from './audit-entry.js';
import { AuditFile, MAX_ENTRIES, MAX_REPEATED_ENTRIES, auditPath } from './audit-file.js';
import { AuditTrail } from './audit-trail.js';
import { MAX_WINDOWS, OTHER_ORIGINS } from './repeat-windows.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function setUp() {
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-audit-'));
  dirs.push(dataDir);
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  let now = Date.parse('2026-03-01T10:00:00Z');
  const clock = { now: () => now, advance: (ms: number) => (now += ms) };
  const trail = (options: { windowMs?: number } = {}) => new AuditTrail({ dataDir, logger, now: clock.now, windowMs: 60_000, ...options });
  const rows = () => {
    const db = new Database(auditPath(dataDir), { readonly: true });
    try {
      return db.prepare('SELECT action, outcome, actor, origin, subject, detail, count FROM audit ORDER BY id').all() as Record<
        string,
        unknown
      >[];
    } finally {
      db.close();
    }
  };
  const audits = () => lines.filter((l) => l['event'] === 'audit');
  return { dataDir, lines, audits, clock, trail, rows };
}

describe('the audit trail', () => {
  it('logs and counts an entry at once, writes it at the next tick, and keeps it across a restart', () => {
    const { dataDir, audits, trail, rows } = setUp();
    const first = trail();
    first.record({ action: 'key_revoked', outcome: 'ok', actor: 'console', origin: '192.168.1.20', subject: 'buoy-7' });
    expect(audits()).toMatchObject([
      { level: 30, action: 'key_revoked', outcome: 'ok', actor: 'console', origin: '192.168.1.20', subject: 'buoy-7', count: 1 },
    ]);
    expect(first.counts()).toEqual([{ action: 'key_revoked', outcome: 'ok', count: 1 }]);
    expect(rows()).toEqual([]);
    // The page shows it before it is written.
    expect(first.latest(10)).toMatchObject([{ action: 'key_revoked', subject: 'buoy-7' }]);
    first.tick();
    expect(rows()).toMatchObject([{ action: 'key_revoked', subject: 'buoy-7', count: 1 }]);
    first.record({ action: 'logout', outcome: 'ok', actor: 'console', origin: '192.168.1.20' });
    first.close();
    expect(rows()).toHaveLength(2);
    expect(statSync(auditPath(dataDir)).size).toBeGreaterThan(0);

    const again = trail();
    expect(again.latest(10).map((e) => e.action)).toEqual(['logout', 'key_revoked']);
    // Counters count since start: the entries of an earlier run are not counted again.
    again.tick();
    expect(again.counts()).toEqual([]);
    again.close();
  });

  it('turns a flood of refused logins into a few entries and log lines, each refusal still counted', () => {
    const { audits, clock, trail, rows } = setUp();
    const t = trail();
    for (let i = 0; i < 3000; i++) {
      t.record({ action: 'login', outcome: 'refused', actor: 'console', origin: '10.0.0.66' });
      if (i % 100 === 0) clock.advance(1000);
    }
    t.tick();
    // The first refusal at once, the rest gathered while the window is open.
    expect(rows()).toMatchObject([{ action: 'login', outcome: 'refused', origin: '10.0.0.66', count: 1 }]);
    clock.advance(60_000);
    t.tick();
    expect(rows()).toMatchObject([{ count: 1 }, { count: 2999 }]);
    expect(audits()).toHaveLength(2);
    expect(audits()[1]).toMatchObject({ level: 40, count: 2999, firstAt: expect.any(String) });
    expect(t.counts()).toEqual([{ action: 'login', outcome: 'refused', count: 3000 }]);
    t.close();
  });

  it('counts addresses apart up to a bound, and the rest together', () => {
    const { trail, rows } = setUp();
    const t = trail();
    for (let round = 0; round < 3; round++)
      for (let a = 0; a < MAX_WINDOWS + 100; a++)
        t.record({ action: 'login', outcome: 'throttled', actor: 'console', origin: `10.1.${a >> 8}.${a & 255}` });
    t.close();
    const stored = rows();
    expect(stored.length).toBeLessThanOrEqual(2 * (MAX_WINDOWS + 1));
    expect(stored.reduce((sum, r) => sum + (r['count'] as number), 0)).toBe(3 * (MAX_WINDOWS + 100));
    expect(stored.filter((r) => r['origin'] === OTHER_ORIGINS).reduce((sum, r) => sum + (r['count'] as number), 0)).toBe(300);
  });

  it('reads, logs and counts what other processes wrote, and counts its own once', () => {
    const { dataDir, audits, trail } = setUp();
    const t = trail();
    t.record({ action: 'dead_letters_purged', outcome: 'ok', actor: 'console', subject: 'all', detail: '3 purged' });
    t.tick();
    const cli = AuditFile.open(dataDir);
    cli.append([entryOf({ action: 'key_added', outcome: 'ok', actor: 'cli', origin: 'alice', subject: 'buoy-9' }, Date.now())], 'cli-1');
    cli.close();
    t.tick();
    t.tick();
    expect(t.counts()).toEqual([
      { action: 'dead_letters_purged', outcome: 'ok', count: 1 },
      { action: 'key_added', outcome: 'ok', count: 1 },
    ]);
    expect(audits().map((l) => [l['action'], l['actor']])).toEqual([
      ['dead_letters_purged', 'console'],
      ['key_added', 'cli'],
    ]);
    t.close();
  });

  it('holds the file open while busy, lets it go once idle, and opens it at a tick only when another process wrote', async () => {
    const { dataDir, trail, audits, clock } = setUp();
    const path = auditPath(dataDir);
    const openFiles = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).startsWith(path);
        } catch {
          return false;
        }
      });
    // As the file looks ticks later: changed longer ago than a tick of the kernel's clock.
    const settle = () => {
      for (const name of [path, `${path}-wal`])
        if (existsSync(name)) utimesSync(name, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    };
    const t = trail();
    expect(openFiles()).toEqual([]);
    const opened = vi.spyOn(AuditFile, 'open');
    const read = vi.spyOn(AuditFile.prototype, 'othersAfter');
    try {
      // A flood: one opening for all its ticks.
      for (let i = 0; i < 5; i++) {
        t.record({ action: 'key_added', outcome: 'ok', actor: 'console', subject: `k${i}` });
        t.tick();
        clock.advance(5_000);
      }
      expect(opened).toHaveBeenCalledTimes(1);
      expect(openFiles()).not.toEqual([]);
      settle();
      t.tick();
      clock.advance(60_000);
      t.tick();
      // What stays open a moment is the log's sync, in the thread pool.
      await vi.waitFor(() => expect(openFiles()).toEqual([]));
      opened.mockClear();
      read.mockClear();
      t.tick();
      t.tick();
      expect(opened).not.toHaveBeenCalled();
      expect(read).not.toHaveBeenCalled();
      const cli = new Database(path);
      cli
        .prepare('INSERT INTO audit (at_ms, first_ms, action, outcome, actor, count, writer) VALUES (?, ?, ?, ?, ?, 1, ?)')
        .run(Date.now(), Date.now(), 'key_revoked', 'ok', 'cli', 'cli-2');
      cli.close();
      t.tick();
      expect(opened).toHaveBeenCalledTimes(1);
      expect(audits().map((l) => l['action'])).toEqual([...Array(5).fill('key_added'), 'key_revoked']);
      settle();
      t.tick();
      clock.advance(60_000);
      t.tick();
      await vi.waitFor(() => expect(openFiles()).toEqual([]));
    } finally {
      opened.mockRestore();
      read.mockRestore();
      t.close();
    }
  });

  it('syncs its log one sync at a time, and once more for the writes made meanwhile', async () => {
    const { trail, rows } = setUp();
    const t = trail();
    const synced = vi.spyOn(AuditFile.prototype, 'syncLog');
    try {
      // Five writes while the first sync runs in the thread pool.
      for (let i = 0; i < 5; i++) {
        t.record({ action: 'key_added', outcome: 'ok', actor: 'console', subject: `k${i}` });
        t.tick();
      }
      expect(synced).toHaveBeenCalledTimes(1);
      await vi.waitFor(() => expect(synced).toHaveBeenCalledTimes(2));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(synced).toHaveBeenCalledTimes(2);
      expect(rows()).toHaveLength(5);
    } finally {
      synced.mockRestore();
      t.close();
    }
  });

  it('keeps entries in the log and the counters while the file cannot be written, and writes them once it can', () => {
    const { dataDir, lines, trail, rows } = setUp();
    // A directory where the file should be: no user, root included, can open it as a database.
    mkdirSync(auditPath(dataDir));
    const t = trail();
    t.record({ action: 'key_added', outcome: 'ok', actor: 'console', subject: 'a' });
    t.tick();
    t.record({ action: 'key_added', outcome: 'ok', actor: 'console', subject: 'b' });
    t.tick();
    expect(lines.filter((l) => l['event'] === 'audit_file_failed')).toHaveLength(1);
    expect(t.counts()).toEqual([{ action: 'key_added', outcome: 'ok', count: 2 }]);
    rmSync(auditPath(dataDir), { recursive: true });
    t.tick();
    expect(rows().map((r) => r['subject'])).toEqual(['a', 'b']);
    t.close();
  });
});

describe('the audit file', () => {
  it('keeps at most its bound of entries, and of refused logins at most theirs', () => {
    const { dataDir } = setUp();
    const file = AuditFile.open(dataDir);
    const at = Date.now();
    const refused = Array.from({ length: MAX_REPEATED_ENTRIES + 500 }, () =>
      entryOf({ action: 'login', outcome: 'refused', actor: 'console' }, at),
    );
    const others = Array.from({ length: MAX_ENTRIES }, (_, i) =>
      entryOf({ action: 'key_added', outcome: 'ok', actor: 'cli', subject: `k${i}` }, at),
    );
    file.append(others.slice(0, 100), 'w');
    file.append(refused, 'w');
    const latest = file.latest(MAX_ENTRIES + 1000);
    expect(latest.filter((e) => e.action === 'login')).toHaveLength(MAX_REPEATED_ENTRIES);
    expect(latest.filter((e) => e.action === 'key_added')).toHaveLength(100);
    file.append(others, 'w');
    const after = file.latest(MAX_ENTRIES + 1000);
    expect(after).toHaveLength(MAX_ENTRIES);
    expect(after[0]!.subject).toBe(`k${MAX_ENTRIES - 1}`);
    file.close();
  });

  it('sets an unreadable file aside and starts a new one', () => {
    const { dataDir } = setUp();
    writeFileSync(auditPath(dataDir), 'not a database, only some bytes of something else'.repeat(100));
    const file = AuditFile.open(dataDir);
    file.append([entryOf({ action: 'logout', outcome: 'ok', actor: 'console' }, Date.now())], 'w');
    expect(file.latest(5)).toHaveLength(1);
    file.close();
    expect(readdirSync(dataDir).some((name) => name.startsWith('audit.db.unreadable-'))).toBe(true);
  });
});

describe('entries told by another program', () => {
  it('are checked by their schema: known actions and outcomes, plain one-line text', () => {
    expect(
      auditInputSchema.safeParse({ action: 'settings_applied', outcome: 'ok', actor: 'harbor.conf', subject: 'gw-pier9' }).success,
    ).toBe(true);
    expect(auditInputSchema.safeParse({ action: 'settings_applied', outcome: 'ok', actor: 'harbor.conf', subject: 'a\nb' }).success).toBe(
      false,
    );
    expect(auditInputSchema.safeParse({ action: 'reboot', outcome: 'ok', actor: 'x' }).success).toBe(false);
    expect(auditInputSchema.safeParse({ action: 'logout', outcome: 'ok', actor: 'x', password: 'p' }).success).toBe(false);
  });
});
