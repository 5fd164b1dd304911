import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import axe from 'axe-core';
import { chromium, type Browser, type BrowserContextOptions, type Locator, type Page } from 'playwright-core';
import decodeQR from 'qr/decode.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueWriter } from '../src/queue/queue-writer.js';
import { chromiumLaunchOptions } from '../scripts/lib/chromium.mjs';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { tempDir } from './support/temp-dir.js';
import { insecureAgent } from './support/console-client.js';
import { fetch as undiciFetch } from 'undici';

const PASSWORD = 'browser-test-console-password';
/** `npm run console:screenshots` writes the screenshots the README shows; other runs only take them. */
const WRITE_SCREENSHOTS = process.env['CONSOLE_SCREENSHOTS'] === '1';
const SCREENSHOTS = join(import.meta.dirname, '..', 'docs', 'console');
// 2^63 and more: valid text for the queue, refused by QuestDB ("Could not parse timestamp"): a dead letter.
const POISON = '9999999999999999999\tpoison-ship\tc\t1';

const VIEWPORTS: { name: string; options: BrowserContextOptions }[] = [
  { name: 'desktop', options: { viewport: { width: 1280, height: 900 } } },
  { name: 'phone', options: { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 } },
];

let gw: TestGateway;
let browser: Browser;
let origin: string;

beforeAll(async () => {
  const dataDir = tempDir('console-browser');
  const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 1 << 20 });
  await queue.append(POISON, 1, Date.now());
  queue.close();
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
  browser = await chromium.launch(chromiumLaunchOptions());
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
});

/** The visible text of an element, once it is there. */
// biome-ignore lint/performance/useDomNodeTextContent: a Playwright locator, not a DOM node: its visible text is what a person reads
const text = (locator: Locator): Promise<string> => locator.innerText();

/** Posts as the JavaScript SDK does: JSON, `X-API-Key`, the time filled in by the client. */
const sdkPost = (key: string, reading: Record<string, unknown>) =>
  undiciFetch(`${origin}/api/v2/ingest`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': key },
    body: JSON.stringify({ time: new Date().toISOString(), ...reading }),
    dispatcher: insecureAgent,
  });

/** No serious or critical accessibility violation, as axe-core judges the page. */
async function expectAccessible(page: Page, what: string): Promise<void> {
  await page.evaluate(axe.source);
  // Evaluated in the page (strings: the test's own types have no DOM).
  const violations = (await page.evaluate(`axe.run(document, { resultTypes: ['violations'] }).then((result) =>
    result.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 3) })))`)) as {
    id: string;
    impact: string | null;
    nodes: string[];
  }[];
  expect(
    violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'),
    what,
  ).toEqual([]);
}

async function shoot(page: Page, name: string, fullPage = true): Promise<void> {
  const png = await page.screenshot({ fullPage });
  expect(png.length).toBeGreaterThan(1000);
  if (WRITE_SCREENSHOTS) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    writeFileSync(join(SCREENSHOTS, `${name}.png`), png);
  }
}

/** Reads the QR code on the page back to text, through Chromium's PNG decoder and the qr package's reader. */
async function readQr(page: Page): Promise<string> {
  const png = await page.locator('.qr').screenshot();
  const blank = await page.context().newPage();
  try {
    const image = (await blank.evaluate(`(async () => {
      const img = new Image();
      img.src = 'data:image/png;base64,${png.toString('base64')}';
      await img.decode();
      const canvas = document.createElement('canvas');
      canvas.width = img.width;
      canvas.height = img.height;
      const context = canvas.getContext('2d');
      context.drawImage(img, 0, 0);
      const data = context.getImageData(0, 0, img.width, img.height);
      return { width: data.width, height: data.height, data: Array.from(data.data) };
    })()`)) as { width: number; height: number; data: number[] };
    return decodeQR({ width: image.width, height: image.height, data: Uint8Array.from(image.data) });
  } finally {
    await blank.close();
  }
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
      await expect.poll(() => new URL(page.url()).pathname).toBe('/console/');
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
      const deadLettered = gw.gateway.stats.deadLettered;
      await page.check('#dead-letters tbody input[type=checkbox]');
      await page.click('text=Re-queue selected');
      expect(await text(page.locator('.notice'))).toContain('Re-queued 1');
      await expect.poll(() => gw.gateway.stats.deadLettered, { timeout: 15_000 }).toBe(deadLettered + 1);

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
