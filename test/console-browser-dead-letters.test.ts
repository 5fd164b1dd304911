import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VIEWPORTS, cellsOffScreen, expectAccessible, launchChromium, logIn, shoot, text } from './support/console-browser.js';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';

const PASSWORD = 'dead-letters-test-console-password';
/** What the central gateway refuses of each reading with a longer ship id, in its own words. */
const CAUSE = 'upstream answered 422: ship_id: String should have at most 12 characters';

let central: TestGateway;
let site: TestGateway;
let browser: Browser;

beforeAll(async () => {
  // A central gateway that takes shorter ship ids than the site does: what it refuses, the site keeps as dead letters.
  central = await startTestGateway({ MAX_ID_LENGTH: '12' });
  // A site id of its own: the centre's is its host name, and a centre gives a site id to one gateway only.
  site = await startTestGateway({
    SITE_ID: 'harbour-north',
    CONSOLE_PASSWORD: PASSWORD,
    UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
    UPSTREAM_API_KEY: TEST_KEY,
  });
  browser = await launchChromium();
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await site?.stop();
  await central?.stop();
});

/** Readings of short and long ship ids in the order given (true: long), one request. */
const batch = (long: boolean[]) =>
  long.map((isLong, i) => ({
    time: new Date(Date.now() - i * 1000).toISOString(),
    ship_id: isLong ? `container-crane-north-${i}` : `crane-${i}`,
    cargo_id: 'load',
    value: i,
  }));

describe.each(VIEWPORTS)('dead letters in Chromium ($name)', ({ name, options }) => {
  it("shows one cause once, whatever else the destination's answers named, readable on a phone; purges after a confirmation", async () => {
    // Two requests, each answered with its own details: the same cause for four readings.
    expect((await site.post('/api/v2/ingest/batch', batch([false, true, false, true, false, true, false, false]))).status).toBe(200);
    expect((await site.post('/api/v2/ingest/batch', batch([true, false, false]))).status).toBe(200);
    await expect.poll(() => site.gateway.queue.deadLetterCount(), { timeout: 30_000 }).toBe(4);

    const context = await browser.newContext({ ...options, ignoreHTTPSErrors: true });
    try {
      const page = await context.newPage();
      await logIn(page, `https://127.0.0.1:${site.gateway.httpsPort}`, PASSWORD, '/console/dead-letters');
      const groups = page.locator('#h-by-sink ~ .scroll tbody tr');
      expect(await groups.count()).toBe(1);
      expect(await text(groups.locator('td').nth(0))).toBe(CAUSE);
      expect(await text(groups.locator('td').nth(1))).toBe('4');
      const letters = page.locator('#dead-letters tbody tr');
      expect(await letters.count()).toBe(4);
      for (const reason of await page.locator('#dead-letters td[data-label=Reason]').allInnerTexts()) expect(reason).toBe(CAUSE);
      expect(await text(page.locator('#dead-letters'))).toMatch(
        /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \| container-crane-north-1 \| load \| 1/,
      );
      expect(await cellsOffScreen(page), 'cells a person must scroll sideways to see').toEqual([]);
      // Four letters fit in a few screens of a phone, not a scroll through a narrow column.
      const height = (await page.evaluate('document.documentElement.scrollHeight')) as number;
      expect(height).toBeLessThan(name === 'phone' ? 2600 : 1600);
      await expectAccessible(page, 'dead letters from the upstream');
      await shoot(page, `dead-letters-upstream-${name}`);

      await page.click('text=Purge all…');
      await page.click('text=Purge for good');
      expect(await text(page.locator('.notice'))).toBe('Purged 4 dead letters for good.');
      expect(await page.locator('#no-dead-letters').count()).toBe(1);
      await page.reload();
      expect(await page.locator('.notice').count()).toBe(0);
    } finally {
      await context.close();
    }
  }, 180_000);
});
