import type { Browser, Page } from 'playwright-core';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueWriter } from '../src/queue/queue-writer.js';
import {
  VIEWPORTS,
  cellsOffScreen,
  chartLabelHeights,
  expectAccessible,
  launchChromium,
  logIn,
  readQr,
  shoot,
  text,
} from './support/console-browser.js';
import { insecureAgent } from './support/console-client.js';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { tempDir } from './support/temp-dir.js';

const PASSWORD = 'browser-test-console-password';
// 2^63 and more: valid text for the queue, refused by QuestDB ("Could not parse timestamp"): a dead letter.
const POISON = '9999999999999999999\tpoison-ship\tc\t1';
/** Smallest height on screen (CSS px) a chart's label may have: the page's small type, readable at arm's length. */
const READABLE_LABEL_PX = 12;

let gw: TestGateway;
let browser: Browser;
let origin: string;

beforeAll(async () => {
  const dataDir = tempDir('console-browser');
  const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 1 << 20 });
  await queue.append(POISON, 1, Date.now());
  queue.close();
  // HOST=127.0.0.1 (the test gateway's): this machine alone reaches it, whatever addresses the board has.
  gw = await startTestGateway({ DATA_DIR: dataDir, CONSOLE_PASSWORD: PASSWORD, HOUSEKEEPING_CRON: '* * * * * *' });
  origin = `https://127.0.0.1:${gw.gateway.httpsPort}`;
  // A site already sending: three ships on the default key.
  for (const ship of ['mast-1', 'mast-2', 'pier-gauge']) {
    const readings = Array.from({ length: 20 }, (_, i) => ({
      ship_id: ship,
      cargo_id: i % 2 === 0 ? 'wind_speed' : 'temperature',
      value: 10 + i / 4,
    }));
    expect((await gw.post('/api/v2/ingest/batch', readings)).status).toBe(200);
  }
  browser = await launchChromium();
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
});

/** Posts as the JavaScript SDK does: JSON, `X-API-Key`, the time filled in by the client. */
const sdkPost = (key: string, reading: Record<string, unknown>) =>
  undiciFetch(`${origin}/api/v2/ingest`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': key },
    body: JSON.stringify({ time: new Date().toISOString(), ...reading }),
    dispatcher: insecureAgent,
  });

/** The refused requests `/metrics` counts (every `harbor_ingest_requests_total` but the 200s), as the Overview words them. */
async function refusedInMetrics(): Promise<string> {
  const families = parsePrometheusTextFormat(await (await fetch(`${gw.url}/metrics`)).text());
  const refused = families
    .find((f) => f.name === 'harbor_ingest_requests_total')!
    .metrics.filter((m) => m.labels?.['status'] !== '200')
    .map((m) => [Number(m.labels!['status']), Number(m.value)] as const)
    .sort((a, b) => a[0] - b[0]);
  const total = refused.reduce((sum, [, n]) => sum + n, 0);
  return `${total} requests (${refused.map(([status, n]) => `${n} × ${status}`).join(', ')})`;
}

describe.each(VIEWPORTS)('the console in Chromium ($name)', ({ name, options }) => {
  it('logs in, shows the state, adds a key a device uses, shows its refusals, revokes it, re-queues a dead letter, logs out', async () => {
    const context = await browser.newContext({ ...options, ignoreHTTPSErrors: true });
    const elsewhere: string[] = [];
    const blocked: string[] = [];
    context.on('request', (request) => {
      if (!request.url().startsWith(origin) && !request.url().startsWith('data:') && request.url() !== 'about:blank')
        elsewhere.push(request.url());
    });
    const page = await context.newPage();
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) blocked.push(message.text());
    });
    try {
      // The root sends a browser to the console, which asks for the password first.
      await page.goto(`${origin}/`);
      await expect.poll(() => new URL(page.url()).pathname).toBe('/console/login');
      await expectAccessible(page, 'login');
      await shoot(page, `login-${name}`);
      await page.fill('#password', TEST_KEY);
      await page.click('button[type=submit]');
      await page.locator('#login-error').waitFor();
      // A person types for longer than the half second the login throttle asks after a wrong password.
      await page.waitForTimeout(600);
      await page.fill('#password', PASSWORD);
      await page.click('button[type=submit]');

      // Overview: the state in the words of gateway_health, the chart, the queue, the sinks.
      // The right password waits its turn behind the wrong one (the login throttle), up to seconds on a loaded machine.
      await expect.poll(() => new URL(page.url()).pathname, { timeout: 15_000 }).toBe('/console/');
      await expect.poll(() => text(page.locator('#state'))).toMatch(/^(delivering|catching up|buffering|refusing)/);
      expect(await page.locator('.chart svg rect').count()).toBe(60);
      expect(await text(page.locator('#fingerprint'))).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
      await expectAccessible(page, 'overview');
      await shoot(page, `overview-${name}`);

      // Keys: add one with a ship prefix; the key is shown once, with the snippet as a QR code.
      const keyName = `buoy-key-${name}`;
      await page.click('nav >> text=Keys');
      await page.fill('#key-name', keyName);
      await page.fill('#key-prefix', `buoy-${name}-`);
      await page.click('text=Add key');
      const key = await page.inputValue('#new-key');
      expect(key).toMatch(/^[A-Za-z0-9_-]{32}$/);
      const snippet = await page.locator('#snippet').textContent();
      expect(snippet).toContain(`#define HARBOR_API_KEY "${key}"`);
      expect(snippet).toContain(`/api/v2/ingest"`);
      expect(await readQr(page)).toBe(snippet);
      await page.locator('button[data-copy=new-key]').waitFor({ state: 'visible' });
      await expectAccessible(page, 'new key');
      await shoot(page, `key-added-${name}`);

      // The key works from an SDK-shaped request; a misconfigured device's refusals show on Devices.
      expect((await sdkPost(key, { ship_id: `buoy-${name}-7`, cargo_id: 'water_level', value: 1.25 })).status).toBe(200);
      expect((await sdkPost(key, { ship_id: 'crane-1', cargo_id: 'load', value: 3 })).status).toBe(403);
      expect((await sdkPost(key, { ship_id: `buoy-${name}-7`, cargo_id: 'water_level', value: 'high' })).status).toBe(422);
      expect((await sdkPost('not-a-key-of-this-gateway', { ship_id: 'x', cargo_id: 'y', value: 1 })).status).toBe(401);
      await page.click('nav >> text=Devices');
      const ship = page.locator('#ships tr', { hasText: `buoy-${name}-7` });
      expect(await text(ship)).toContain(keyName);
      expect(await text(ship)).toContain('water_level=1.25');
      const refused = page.locator('#key-refusals tr', { hasText: keyName });
      expect(await text(refused.locator('td').nth(0))).toBe('1');
      expect(await text(refused.locator('td').nth(1))).toBe('1');
      expect(await text(refused)).toContain('body.value');
      await page.locator('#wrong-keys tr', { hasText: '127.0.0.1' }).waitFor();
      await expectAccessible(page, 'devices');
      await shoot(page, `devices-${name}`);

      // Revoke, with a confirmation; the device's next request is refused.
      await page.click('nav >> text=Keys');
      await page.click(`button[aria-label="Revoke ${keyName}"]`);
      await expectAccessible(page, 'revoke confirmation');
      await page.click(`text=Revoke ${keyName}`);
      expect(await text(page.locator('.notice'))).toContain(`Key ${keyName} revoked`);
      expect(await text(page.locator('#keys'))).not.toContain(keyName);
      expect((await sdkPost(key, { ship_id: `buoy-${name}-7`, cargo_id: 'water_level', value: 1.5 })).status).toBe(401);

      // Dead letters: the poisoned reading, re-queued, goes through the sink again.
      await expect.poll(() => gw.gateway.queue.deadLetterCount(), { timeout: 15_000 }).toBe(1);
      await page.click('nav >> text=Dead letters');
      expect(await page.locator('#dead-letters tbody tr').count()).toBe(1);
      expect(await text(page.locator('#dead-letters'))).toContain('Could not parse timestamp');
      await expectAccessible(page, 'dead letters');
      await shoot(page, `dead-letters-${name}`);
      // Refused again, it is a dead letter again, not a second refusal: the sink's readings taken tell it went through.
      const taken = () => gw.gateway.stats.sinks.get('questdb')?.taken ?? 0;
      const takenBefore = taken();
      await page.check('#dead-letters tbody input[type=checkbox]');
      await page.click('text=Re-queue selected');
      expect(await text(page.locator('.notice'))).toContain('Re-queued 1');
      await expect.poll(taken, { timeout: 15_000 }).toBe(takenBefore + 1);
      await expect.poll(() => gw.gateway.queue.deadLetterCount(), { timeout: 15_000 }).toBe(1);

      await page.click('nav >> text=Certificate and settings');
      expect(await text(page.locator('#check-config'))).toContain('configuration valid');
      expect(await text(page.locator('#settings'))).not.toContain(PASSWORD);
      await expectAccessible(page, 'settings');
      await shoot(page, `settings-${name}`, false);

      // The audit trail: what this session did, newest first, and the refused password before it.
      await page.click('nav >> text=Audit');
      const entries = page.locator('#audit-entries li');
      expect(await text(entries.filter({ hasText: 'Key revoked' }).filter({ hasText: keyName }))).toContain('127.0.0.1');
      expect(await text(entries.filter({ hasText: 'Key added' }).filter({ hasText: keyName }))).toContain(
        `ships starting with buoy-${name}-`,
      );
      expect(await entries.filter({ hasText: 'Dead letters re-queued' }).count()).toBeGreaterThanOrEqual(1);
      expect(await entries.filter({ hasText: 'Console login' }).filter({ hasText: 'refused' }).count()).toBeGreaterThanOrEqual(1);
      expect(await text(page.locator('#audit-entries'))).not.toContain(key);
      // Each entry wraps within the page on a phone: nothing scrolls sideways.
      expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
      await expectAccessible(page, 'audit');
      await shoot(page, `audit-${name}`);

      // Log out: the console asks for the password again.
      await page.click('text=Log out');
      await expect.poll(() => new URL(page.url()).pathname).toBe('/console/login');
      await page.goto(`${origin}/console/devices`);
      await expect.poll(() => new URL(page.url()).pathname).toBe('/console/login');

      expect(elsewhere, 'requests that left the gateway (the console must work offline)').toEqual([]);
      expect(blocked, 'what the Content-Security-Policy blocked').toEqual([]);
    } finally {
      await context.close();
    }
  }, 180_000);
});

describe.each(VIEWPORTS)('what the console says is true ($name)', ({ options }) => {
  async function withPage(use: (page: Page) => Promise<void>, at = origin): Promise<void> {
    const context = await browser.newContext({ ...options, ignoreHTTPSErrors: true });
    try {
      const page = await context.newPage();
      await logIn(page, at, PASSWORD);
      await use(page);
    } finally {
      await context.close();
    }
  }

  it('counts on the Overview the refused requests /metrics counts, and says which dead letters each figure counts', async () => {
    // Refusals of the API, and answers outside it that /metrics does not count.
    expect((await sdkPost(TEST_KEY, { ship_id: 'mast-1', cargo_id: 'wind_speed', value: 'strong' })).status).toBe(422);
    expect((await sdkPost('not-a-key-of-this-gateway', { ship_id: 'mast-1', cargo_id: 'wind_speed', value: 1 })).status).toBe(401);
    expect((await undiciFetch(`${origin}/no-such-page`, { dispatcher: insecureAgent })).status).toBe(404);
    expect((await undiciFetch(`${origin}/status`, { dispatcher: insecureAgent })).status).toBe(401);
    await expect.poll(() => gw.gateway.queue.deadLetterCount(), { timeout: 15_000 }).toBeGreaterThanOrEqual(1);
    await withPage(async (page) => {
      const inMetrics = await refusedInMetrics();
      expect(inMetrics).toMatch(/× 401.*× 422/);
      expect(await text(page.locator('#refused-since-start'))).toBe(inMetrics);
      // The dead letters in the queue file now, and those each sink made since start: each named for what it counts.
      expect(await text(page.locator('#dead-letters-now'))).toMatch(/^\d+ in the queue file, every sink$/);
      expect(await text(page.locator('#h-sinks ~ .scroll thead'))).toContain('Dead-lettered since start');
    });
  }, 120_000);

  it('gives devices the address the gateway listens on, in the Overview, the snippet and its QR code', async () => {
    await withPage(async (page) => {
      // The gateway listens on 127.0.0.1: the board's LAN addresses would not reach it.
      expect(await text(page.locator('#https-addresses'))).toMatch(new RegExp(`^${origin}/\\n`));
      expect(await text(page.locator('#this-machine-only'))).toContain('only this machine reaches it');
      await page.goto(`${origin}/console/keys`);
      await page.fill('#key-name', `address-${options.viewport?.width}`);
      await page.click('text=Add key');
      const snippet = await page.locator('#snippet').textContent();
      expect(snippet).toContain(`#define HARBOR_URL "${origin}/api/v2/ingest"`);
      expect(await readQr(page)).toBe(snippet);
      expect(await text(page.locator('#snippet-local-only'))).toContain('only this machine reaches this URL');
    });
  }, 120_000);

  it('gives a gateway on an IPv6 address in brackets, in the Overview, the snippet and its QR code', async () => {
    const v6 = await startTestGateway({ HOST: '::1', CONSOLE_PASSWORD: PASSWORD });
    try {
      const v6Origin = `https://[::1]:${v6.gateway.httpsPort}`;
      await withPage(async (page) => {
        expect(await text(page.locator('#https-addresses'))).toMatch(new RegExp(`^${v6Origin.replace(/[[\]]/g, '\\$&')}/\\n`));
        await page.goto(`${v6Origin}/console/keys`);
        await page.fill('#key-name', 'v6-device');
        await page.click('text=Add key');
        const snippet = await page.locator('#snippet').textContent();
        expect(snippet).toContain(`#define HARBOR_URL "${v6Origin}/api/v2/ingest"`);
        expect(await readQr(page)).toBe(snippet);
      }, v6Origin);
    } finally {
      await v6.stop();
    }
  }, 120_000);

  it('says what an action did from the session, once, and nothing a link makes up', async () => {
    await withPage(async (page) => {
      await page.goto(`${origin}/console/dead-letters?done=requeued&n=999999`);
      expect(await page.locator('.notice').count()).toBe(0);
      await page.goto(`${origin}/console/dead-letters?done=purged&n=5`);
      expect(await page.locator('.notice').count()).toBe(0);
      await page.goto(`${origin}/console/keys?revoked=default`);
      expect(await page.locator('.notice').count()).toBe(0);
      const keyName = `flash-${options.viewport?.width}`;
      await page.fill('#key-name', keyName);
      await page.click('text=Add key');
      await page.click('text=Back to the keys');
      await page.click(`button[aria-label="Revoke ${keyName}"]`);
      await page.click(`text=Revoke ${keyName}`);
      expect(await text(page.locator('.notice'))).toBe(`Key ${keyName} revoked: the gateway no longer accepts it.`);
      await page.reload();
      expect(await page.locator('.notice').count()).toBe(0);
    });
  }, 120_000);

  it('shows a dead letter with its time in UTC and says where a re-queue sends it', async () => {
    await expect.poll(() => gw.gateway.queue.deadLetterCount(), { timeout: 15_000 }).toBeGreaterThanOrEqual(1);
    await withPage(async (page) => {
      await page.goto(`${origin}/console/dead-letters`);
      expect(await text(page.locator('#dead-letters'))).toContain('QuestDB refused the reading: Could not parse timestamp');
      // The reading's time in UTC to the nanosecond, not the nanoseconds since 1970 the queue keeps.
      expect(await text(page.locator('#dead-letters tbody td[data-label=Readings]').first())).toBe(
        '2286-11-20T17:46:39.999999999Z | poison-ship | c | 1',
      );
      expect(await text(page.locator('#dead-letters-hint'))).toContain('for the one destination that refused it');
    });
  }, 120_000);

  it('fits every page on the screen: every value of every table without scrolling sideways, chart labels readable', async () => {
    await expect.poll(() => gw.gateway.queue.deadLetterCount(), { timeout: 15_000 }).toBeGreaterThanOrEqual(1);
    await withPage(async (page) => {
      for (const path of [
        '/console/',
        '/console/devices',
        '/console/devices/mast-1',
        '/console/keys',
        '/console/dead-letters',
        '/console/settings',
      ]) {
        await page.goto(`${origin}${path}`);
        expect(await page.locator('main table tbody tr').count(), path).toBeGreaterThan(0);
        expect(await cellsOffScreen(page), `${path}: cells a person must scroll sideways to see`).toEqual([]);
        for (const height of await chartLabelHeights(page))
          expect(height, `${path}: a chart label`).toBeGreaterThanOrEqual(READABLE_LABEL_PX);
      }
      await page.goto(`${origin}/console/`);
      expect((await chartLabelHeights(page)).length).toBeGreaterThanOrEqual(5);
    });
  }, 120_000);
});
