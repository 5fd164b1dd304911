import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { afterAll, describe, expect, it } from 'vitest';
import type { AuditInput } from '../../audit/audit-entry.js';
import { EMPTY_CATALOGUE } from '../../catalogue/catalogue.js';
import { KeyStore } from '../../keys/key-store.js';
import { createLogger } from '../../log/logger.js';
import { QueueWriter } from '../../queue/queue-writer.js';
import { GatewayStats } from '../../stats.js';
import { GatewayConsole } from '../gateway-console.js';
import type { ApplianceReleases, UpdateInstaller } from '../update-bundle.js';

const dir = mkdtempSync(join(tmpdir(), 'harbor-console-rollback-'));
const queue = QueueWriter.open({ dataDir: dir, durability: 'process-crash', maxBytes: 1 << 20 });
afterAll(() => {
  queue.close();
  rmSync(dir, { recursive: true, force: true });
});

const releases: ApplianceReleases = {
  version: '0.5.0',
  slot: 'B',
  trial: false,
  previous: { version: '0.4.0', slot: 'A' },
  previousUnavailable: null,
  lastUpdate: '0.4.0 -> 0.5.0, confirmed (2026-11-26 10:00 UTC)',
};

/** A console with an updater that records what it was asked, and a logged-in browser over TLS. */
function board(described: ApplianceReleases | undefined = releases) {
  const asked: string[] = [];
  const audited: AuditInput[] = [];
  const installer: UpdateInstaller = {
    description: 'Upload a signed update bundle.',
    install: async () => ({ ok: false, message: 'not here' }),
    releases: () => described,
    rollBack: async (to) => {
      asked.push(to);
      return { ok: true, message: `Going back to ${to} (slot A).` };
    },
  };
  const console = new GatewayConsole({
    queue,
    stats: new GatewayStats(),
    keys: new KeyStore({ defaultKey: 'device-key', path: join(dir, 'api-keys'), pollMs: 1000, logger: createLogger('silent') }),
    failureDelay: { total: 0, tracked: 0 },
    isStopping: () => false,
    version: '0.5.0',
    certificate: () => ({ fingerprintSha256: 'AA', source: 'self-signed', subjectAltName: '', notAfter: '', pem: '' }),
    sinks: [],
    delivery: { notifyAppended: () => undefined },
    password: 'console-password-0123',
    metricsToken: undefined,
    env: {},
    audit: { record: (entry) => void audited.push(entry), latest: () => [], counts: () => [] },
    updateInstaller: installer,
    catalogue: { catalogue: EMPTY_CATALOGUE },
    logger: createLogger('silent'),
    listenHost: '0.0.0.0',
    readings: undefined,
  });
  console.httpsPort = 8443;
  const hono = new Hono({ strict: false });
  console.mount(hono);
  const { token, session } = console.sessions.create();
  const tls = { incoming: { socket: { remoteAddress: '192.168.1.7', encrypted: true } } };
  const headers = { cookie: `__Host-harbor_console=${token}`, origin: 'https://gateway.local:8443', host: 'gateway.local:8443' };
  const get = async (path: string) => hono.request(`https://gateway.local:8443${path}`, { headers }, tls);
  const post = async (path: string, fields: Record<string, string>) =>
    hono.request(
      `https://gateway.local:8443${path}`,
      { method: 'POST', headers, body: new URLSearchParams({ _csrf: session.csrf, ...fields }) },
      tls,
    );
  return { asked, audited, get, post };
}

describe('going back to the previous release from the console', () => {
  it('shows the running and the previous release, and goes back only after a confirmation', async () => {
    const { asked, audited, get, post } = board();
    const settings = await (await get('/console/settings')).text();
    expect(settings).toMatch(/<dd id="release">0\.5\.0 \(slot B, committed\)<\/dd>/);
    expect(settings).toMatch(/<dd id="previous-release">0\.4\.0 \(slot A\)<\/dd>/);
    expect(settings).toContain('action="/console/update/rollback"');
    const confirm = await post('/console/update/rollback', { to: '0.4.0' });
    expect(confirm.status).toBe(200);
    expect(await confirm.text()).toContain('Go back to 0.4.0?');
    expect(asked).toEqual([]);
    const done = await post('/console/update/rollback', { to: '0.4.0', confirm: 'yes' });
    expect(done.status).toBe(200);
    expect(await done.text()).toContain('Going back to 0.4.0 (slot A).');
    expect(asked).toEqual(['0.4.0']);
    // Asked once confirmed, in the audit trail as the console's other actions are.
    expect(audited).toEqual([
      {
        action: 'rollback_requested',
        outcome: 'ok',
        actor: 'console',
        origin: '192.168.1.7',
        subject: '0.4.0',
        detail: 'Going back to 0.4.0 (slot A).',
      },
    ]);
  });

  it('refuses a page out of date, a board without a previous release, and a form from elsewhere', async () => {
    const { asked, audited, post } = board();
    const stale = await post('/console/update/rollback', { to: '0.3.0', confirm: 'yes' });
    expect(stale.status).toBe(409);
    expect(await stale.text()).toContain('The previous release is now 0.4.0, not 0.3.0');
    const none = board({ ...releases, previous: null, previousUnavailable: 'nothing was installed since the card was flashed' });
    expect(await (await none.get('/console/settings')).text()).toContain('none to go back to: nothing was installed');
    expect((await none.post('/console/update/rollback', { to: '0.4.0', confirm: 'yes' })).status).toBe(409);
    const forged = await post('/console/update/rollback', { to: '0.4.0', confirm: 'yes', _csrf: 'not-the-token' });
    expect(forged.status).toBe(403);
    expect([...asked, ...none.asked]).toEqual([]);
    expect([...audited, ...none.audited].map((e) => [e.action, e.outcome, e.subject, e.detail])).toEqual([
      ['rollback_requested', 'refused', '0.3.0', 'the previous release is now 0.4.0'],
      ['rollback_requested', 'refused', '0.4.0', 'no previous release'],
    ]);
  });
});
