// The audit trail of a running gateway: every audited action of the console and of the command
// line is a log line, a counter in /metrics, an entry on the console's audit page and in
// DATA_DIR/audit.db that outlives the gateway; and no secret of any of them is in any of those.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { auditPath } from '../src/audit/audit-file.js';
import { loadConfig } from '../src/config/config.js';
import { UPLOAD_BUNDLE, UPLOAD_VERDICT, folderInstaller } from '../src/console/update-bundle.js';
import { type Gateway, startGateway } from '../src/gateway.js';
import { createLogger } from '../src/log/logger.js';
import { QueueWriter } from '../src/queue/queue-writer.js';
import { ConsoleClient } from './support/console-client.js';
import { TEST_KEY } from './support/gateway.js';
import { uniqueTable } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const PASSWORD = 'audit-console-password-0123';
const METRICS_TOKEN = 'audit-metrics-token-0123456789';
// Refused by QuestDB ("Could not parse timestamp"): a dead letter to re-queue and purge.
const POISON = '9999999999999999999\tpoison-ship\tc\t1';

let gateway: Gateway;
let dataDir: string;
let updateFolder: string;
const logs: Record<string, unknown>[] = [];
/** Every secret the test hands over or is handed: none may appear anywhere the trail shows. */
const secrets = new Set<string>([PASSWORD, METRICS_TOKEN, TEST_KEY]);

const cli = (args: string[], input?: string) =>
  new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [inject('bundlePath'), ...args],
      { env: { PATH: process.env['PATH'] ?? '', DATA_DIR: dataDir } },
      (error, stdout, stderr) => (error ? reject(Object.assign(error, { stderr })) : resolve({ stdout, stderr })),
    );
    child.stdin?.end(input ?? '');
  });

beforeAll(async () => {
  dataDir = tempDir('audit');
  updateFolder = tempDir('audit-upload');
  const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 1 << 20 });
  await queue.append(POISON, 1, Date.now());
  queue.close();
  const env = {
    PORT: '0',
    HTTPS_PORT: '0',
    HOST: '127.0.0.1',
    API_KEY: TEST_KEY,
    DATA_DIR: dataDir,
    QUESTDB_URL: inject('questdbUrl'),
    QUESTDB_TABLE: uniqueTable('audit'),
    FLUSH_INTERVAL_MS: '50',
    HEALTH_REPORT: 'false',
    RETENTION_DAYS: '0',
    CONSOLE_PASSWORD: PASSWORD,
    METRICS_TOKEN,
  };
  const config = loadConfig(env);
  const logger = createLogger('trace', { write: (line: string) => void logs.push(JSON.parse(line)) });
  gateway = await startGateway(config, logger, {
    deliveryScript: inject('bundlePath'),
    env,
    updateInstaller: folderInstaller({ folder: updateFolder, verdictWaitMs: 10_000 }),
  });
});
afterAll(() => gateway?.stop());

/** What the appliance's updater does with an upload: looks at it and answers in the folder. */
async function answerUpload(): Promise<void> {
  await waitUntil('the upload', () => existsSync(join(updateFolder, UPLOAD_BUNDLE)));
  writeFileSync(
    join(updateFolder, UPLOAD_VERDICT),
    JSON.stringify({ state: 'installing', message: 'Signature verified: installing 9.9.9 into slot B' }),
  );
}

async function auditCounts(): Promise<Map<string, number>> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  const family = parsePrometheusTextFormat(text).find((f) => f.name === 'harbor_audit_events_total');
  return new Map((family?.metrics ?? []).map((m) => [`${m.labels?.['action']} ${m.labels?.['outcome']}`, Number(m.value)]));
}

describe('the audit trail', () => {
  it('records every audited action of the console and the command line: log line, counter, page, file; and no secret', async () => {
    const browser = new ConsoleClient(gateway.url);
    await browser.request('/console/login');
    expect((await browser.submitLogin('not-the-password')).status).toBe(401);
    // At once again: before its turn, turned away by the throttle.
    const held = await browser.submitLogin('still-not-the-password');
    expect(held.status).toBe(429);
    await new Promise((r) => setTimeout(r, Number(held.headers.get('retry-after')) * 1000));
    const login = await browser.submitLogin(PASSWORD);
    expect(login.status).toBe(303);
    for (const value of browser.cookies.values()) secrets.add(value);

    // Keys: added and revoked in the console.
    await browser.request('/console/keys');
    secrets.add(browser.csrf!);
    secrets.add(browser.loginToken!);
    const added = await browser.post('/console/keys', [
      ['name', 'buoy-audit'],
      ['ship_prefix', 'buoy-'],
    ]);
    expect(added.status).toBe(201);
    secrets.add(/value="([A-Za-z0-9_-]{32})"/.exec(added.html)![1]!);
    keyHashes();
    expect(
      (
        await browser.post('/console/keys/revoke', [
          ['name', 'buoy-audit'],
          ['confirm', 'yes'],
        ])
      ).status,
    ).toBe(303);

    // Dead letters: the poison reading re-queued, refused again, purged.
    await waitUntil('the poison reading as a dead letter', () => gateway.queue.deadLetterCount() === 1);
    const id = readLetterId;
    const first = await id();
    expect(
      (
        await browser.post('/console/dead-letters', [
          ['action', 'requeue'],
          ['id', String(first)],
        ])
      ).status,
    ).toBe(303);
    // Refused again: a dead letter once more, under a new id.
    await waitUntil('the re-queued reading refused again', async () => gateway.queue.deadLetterCount() === 1 && (await id()) !== first);
    expect(
      (
        await browser.post('/console/dead-letters/purge', [
          ['confirm', 'yes'],
          ['id', String(await id())],
        ])
      ).status,
    ).toBe(303);

    // An update bundle uploaded in the console.
    const form = new FormData();
    form.append('bundle', new Blob([Buffer.from('not really a bundle')]), 'harbor-update.raucb');
    const [upload] = await Promise.all([
      fetch(`${gateway.url}/console/update?_csrf=${encodeURIComponent(browser.csrf!)}`, {
        method: 'POST',
        body: form,
        headers: { cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join('; '), origin: gateway.url },
      }),
      answerUpload(),
    ]);
    expect(upload.status).toBe(200);

    // The command line: a key added and revoked, dead letters re-queued and purged, and what the
    // appliance's tools record through `audit record`.
    const cliKey = (await cli(['keys', 'add', 'tank-audit'])).stdout.trim();
    secrets.add(cliKey);
    keyHashes();
    await cli(['keys', 'revoke', 'tank-audit']);
    await cli(['dead-letters', 'requeue', '--all']);
    await cli(['dead-letters', 'purge', '--all']);
    await cli(
      ['audit', 'record'],
      `${JSON.stringify({ action: 'settings_applied', outcome: 'ok', actor: 'harbor.conf', subject: 'gw-audit', detail: 'harbor.conf from the boot partition' })}\n${JSON.stringify({ action: 'update_installed', outcome: 'refused', actor: 'harbor-update', subject: 'harbor-update.raucb', detail: 'older than the running release' })}\n`,
    );
    await expect(cli(['audit', 'record'], '{"action":"key_added","outcome":"ok","actor":"x","password":"p"}\n')).rejects.toMatchObject({
      code: 65,
    });

    expect((await browser.post('/console/logout', [])).status).toBe(303);
    gateway.audit.tick();

    const expected = [
      'login refused',
      'login throttled',
      'login ok',
      'key_added ok',
      'key_revoked ok',
      'dead_letters_requeued ok',
      'dead_letters_purged ok',
      'update_uploaded ok',
      'settings_applied ok',
      'update_installed refused',
      'logout ok',
    ];
    const counts = await auditCounts();
    for (const what of expected) expect(counts.get(what), what).toBeGreaterThanOrEqual(1);
    expect(counts.get('key_added ok')).toBe(2);
    expect(counts.get('key_revoked ok')).toBe(2);
    expect(counts.get('dead_letters_requeued ok')).toBe(2);
    expect(counts.get('dead_letters_purged ok')).toBe(2);

    const lines = logs.filter((l) => l['event'] === 'audit');
    for (const what of expected)
      expect(
        lines.some((l) => `${l['action']} ${l['outcome']}` === what),
        what,
      ).toBe(true);
    expect(lines.find((l) => l['action'] === 'login' && l['outcome'] === 'refused')).toMatchObject({
      actor: 'console',
      origin: '127.0.0.1',
    });
    expect(lines.find((l) => l['action'] === 'key_revoked' && l['actor'] === 'console')).toMatchObject({ subject: 'buoy-audit' });
    expect(lines.find((l) => l['action'] === 'key_added' && l['actor'] === 'cli')).toMatchObject({
      subject: 'tank-audit',
      detail: 'all ships',
    });

    const again = new ConsoleClient(gateway.url);
    await again.login(PASSWORD);
    const page = await again.request('/console/audit');
    expect(page.status).toBe(200);
    for (const words of [
      'Key revoked',
      'buoy-audit',
      'tank-audit',
      'Dead letters purged',
      'Update uploaded',
      'Settings applied',
      'gw-audit',
    ])
      expect(page.html).toContain(words);
    for (const value of again.cookies.values()) secrets.add(value);
    secrets.add(again.csrf!);

    // Outlives the gateway: everything gathered is written at the stop, and read by the command line.
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    await gateway.stop();
    const listed = JSON.parse((await cli(['audit', 'list', '--json', '--limit', '100'])).stdout) as { action: string; outcome: string }[];
    for (const what of expected)
      expect(
        listed.some((e) => `${e.action} ${e.outcome}` === what),
        what,
      ).toBe(true);

    const files = ['', '-wal'].map((suffix) => `${auditPath(dataDir)}${suffix}`).filter(existsSync);
    // The page's form token is the page's own; what the trail shows is its list.
    const table = /<ol class="trail" id="audit-entries"[\s\S]*<\/ol>/.exec(page.html)![0];
    const everything = [
      JSON.stringify(logs),
      JSON.stringify(listed),
      table,
      metrics,
      ...files.map((file) => readFileSync(file).toString('latin1')),
    ].join('\n');
    expect(secrets.size).toBeGreaterThan(8);
    for (const secret of secrets) expect(everything.includes(secret), `a secret (${secret.length} characters) leaked`).toBe(false);
  });
});

/** The hashes the key file holds now: a hash is no more to be shown than its key. */
function keyHashes(): void {
  for (const hash of readFileSync(join(dataDir, 'api-keys'), 'utf8').matchAll(/hmac-sha256\$\S+/g)) secrets.add(hash[0]);
}

async function readLetterId(): Promise<number> {
  const letters = JSON.parse((await cli(['dead-letters', 'list', '--json'])).stdout) as { id: number }[];
  return letters[0]!.id;
}
