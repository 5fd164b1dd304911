import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/lib/ports.mjs';
import {
  VIEWPORTS,
  cellsOffScreen,
  chartLabelHeights,
  expectAccessible,
  launchChromium,
  logIn,
  shoot,
  text,
} from './support/console-browser.js';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { waitForDrained } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

const PASSWORD = 'ships-test-console-password';
/** A ship id with what SQL must quote, and what a URL must encode. */
const TUG = "tug 'Hercules'/3";
const MIN = 60_000;
const CATALOGUE = `ships:
  reefer-7: MV Nordlicht
cargo:
  - match: reefer_temp
    name: Reefer temperature
    unit: °C
    min: -25
    max: -18
    decimals: 1
`;

let site: TestGateway;
let browser: Browser;
const closers: (() => Promise<void>)[] = [];

/** The site's own gateway: a catalogue naming one ship and its cargo, the readings in the shared QuestDB. */
const siteEnv = (dir: string) => {
  const catalogue = join(dir, 'catalogue.yaml');
  writeFileSync(catalogue, CATALOGUE);
  return { DATA_DIR: join(dir, 'data'), CATALOGUE_FILE: catalogue, CONSOLE_PASSWORD: PASSWORD };
};
let env: Record<string, string>;

beforeAll(async () => {
  site = await startTestGateway(siteEnv(tempDir('console-ships')));
  env = site.env;
  const now = Date.now();
  // Six hours of a reefer's temperature, one reading every 5 minutes, the latest out of its normal range.
  const reefer = Array.from({ length: 72 }, (_, i) => ({
    time: new Date(now - (71 - i) * 5 * MIN - 30_000).toISOString(),
    ship_id: 'reefer-7',
    cargo_id: 'reefer_temp',
    value: i === 71 ? -17.5 : -21 + (i % 6) * 0.5,
  }));
  const tug = [0, 1, 2].map((i) => ({
    time: new Date(now - i * 5 * MIN).toISOString(),
    ship_id: TUG,
    cargo_id: 'fuel_level',
    value: 80 - i,
  }));
  expect((await site.post('/api/v2/ingest/batch', [...reefer, ...tug])).status).toBe(200);
  await waitForDrained(site);
  browser = await launchChromium();
}, 600_000);

afterAll(async () => {
  await browser?.close();
  for (const close of closers) await close();
  await site?.stop();
});

const origin = (gw: TestGateway) => `https://127.0.0.1:${gw.gateway.httpsPort}`;

async function withPage<T>(options: (typeof VIEWPORTS)[number]['options'], use: (page: Page) => Promise<T>): Promise<T> {
  const context = await browser.newContext({ ...options, ignoreHTTPSErrors: true });
  try {
    return await use(await context.newPage());
  } finally {
    await context.close();
  }
}

describe.each(VIEWPORTS)("a ship's page in Chromium ($name)", ({ name, options }) => {
  it('charts its cargo over the last hours from QuestDB, with the names, units and normal range of the catalogue', async () => {
    await withPage(options, async (page) => {
      await logIn(page, origin(site), PASSWORD, '/console/devices');
      expect(await text(page.locator('#ships tr', { hasText: 'reefer-7' }))).toContain('MV Nordlicht');
      await page.click('#ships a >> text=reefer-7');
      await expect.poll(() => new URL(page.url()).pathname).toBe('/console/devices/reefer-7');
      expect(await text(page.locator('h1'))).toBe('Ship MV Nordlicht');
      expect(await text(page.locator('#latest-values'))).toMatch(/Reefer temperature\s+reefer_temp\s+-17\.5 °C\s+out of range/);
      const chart = page.locator('.cargo-chart[data-cargo=reefer_temp]');
      expect(await text(chart.locator('h3'))).toBe('Reefer temperature (°C)');
      expect(await chart.locator('svg polyline').count()).toBe(1);
      expect(await chart.locator('svg rect.normal').count()).toBe(1);
      expect(await text(chart.locator('figcaption'))).toMatch(
        /^Reefer temperature over the last 6 hours: 72 averages of 5 minutes, from -21\.0 °C to -17\.5 °C, the latest -17\.5 °C at .*; normal range -25\.0 °C to -18\.0 °C\.$/,
      );
      expect(await text(chart.locator('.y-axis'))).toMatch(/°C\n.*°C/);
      for (const height of await chartLabelHeights(page)) expect(height, 'a chart label').toBeGreaterThanOrEqual(12);
      expect(await cellsOffScreen(page), 'cells a person must scroll sideways to see').toEqual([]);
      await expectAccessible(page, 'ship');
      await shoot(page, `ship-${name}`);

      await page.click('nav[aria-label=Span] >> text=1 h');
      expect(await text(page.locator('#h-history'))).toBe('Cargo over the last hour');
      expect(await text(chart.locator('figcaption'))).toMatch(/^Reefer temperature over the last hour: 1[23] averages of 1 minute, /);

      // A ship without a catalogue entry, its id quoted in SQL: its ids as they are.
      await page.goto(`${origin(site)}/console/devices`);
      await page.click(`#ships a >> text=${TUG}`);
      expect(await text(page.locator('h1'))).toBe(`Ship ${TUG}`);
      expect(await text(page.locator('.cargo-chart[data-cargo=fuel_level] figcaption'))).toMatch(
        /^fuel_level over the last 6 hours: 3 averages of 5 minutes, from 78 to 80, /,
      );
    });
  }, 120_000);
});

describe("a ship's page without QuestDB", () => {
  it('says QuestDB did not answer, and shows the latest values the gateway saw', async () => {
    const unreachable = await startTestGateway({
      ...siteEnv(tempDir('console-ships-unreachable')),
      QUESTDB_URL: `http://127.0.0.1:${await freePort()}`,
    });
    closers.push(() => unreachable.stop());
    expect((await unreachable.post('/api/v2/ingest', { ship_id: 'reefer-7', cargo_id: 'reefer_temp', value: -20 })).status).toBe(200);
    for (const { options } of VIEWPORTS) {
      await withPage(options, async (page) => {
        await logIn(page, origin(unreachable), PASSWORD, '/console/devices/reefer-7');
        expect(await text(page.locator('#history-state'))).toMatch(
          /^QuestDB at http:\/\/127\.0\.0\.1:\d+ did not answer \(QuestDB unreachable: ECONNREFUSED/,
        );
        expect(await text(page.locator('#latest-values'))).toContain('-20.0 °C');
        await expectAccessible(page, 'ship, QuestDB unreachable');
      });
    }
  }, 120_000);

  it('says the gateway keeps no history when it writes to no local QuestDB', async () => {
    const forwarding = await startTestGateway({
      ...siteEnv(tempDir('console-ships-off')),
      LOCAL_QUESTDB: 'off',
      UPSTREAM_URL: `${site.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: TEST_KEY,
    });
    closers.push(() => forwarding.stop());
    expect((await forwarding.post('/api/v2/ingest', { ship_id: 'reefer-7', cargo_id: 'reefer_temp', value: -19 })).status).toBe(200);
    for (const { options } of VIEWPORTS) {
      await withPage(options, async (page) => {
        await logIn(page, origin(forwarding), PASSWORD, '/console/devices/reefer-7');
        expect(await text(page.locator('#history-state'))).toMatch(/^This gateway writes to no local QuestDB/);
        expect(await text(page.locator('#latest-values'))).toContain('-19.0 °C');
      });
    }
  }, 120_000);
});

describe('the Devices page under a flood of made-up ship ids, and across a restart', () => {
  it('keeps every live ship, says how many readings it left out, and lists the same ships after a restart', async () => {
    const now = Date.now();
    // A full table of live ships: the two of the site so far and 998 more.
    const real = Array.from({ length: 998 }, (_, i) => ({
      time: new Date(now).toISOString(),
      ship_id: `real-${String(i).padStart(3, '0')}`,
      cargo_id: 'level',
      value: i,
    }));
    expect((await site.post('/api/v2/ingest/batch', real)).status).toBe(200);
    // Anyone with a device key can send ship ids nobody has.
    const fake = Array.from({ length: 1500 }, (_, i) => ({
      time: new Date(now).toISOString(),
      ship_id: `fake-${i}`,
      cargo_id: 'x',
      value: 1,
    }));
    expect((await site.post('/api/v2/ingest/batch', fake)).status).toBe(200);

    const expectAllListed = async (page: Page) => {
      const ids = await page.locator('#ships tbody th a').allInnerTexts();
      expect(ids).toHaveLength(1000);
      expect(new Set(ids)).toEqual(new Set(['reefer-7', TUG, ...real.map((r) => r.ship_id)]));
      expect(await text(page.locator('#ships-left-out'))).toContain('the latest: fake-1499, fake-1498, fake-1497, fake-1496, fake-1495');
    };
    let since = '';
    for (const { options } of VIEWPORTS) {
      await withPage(options, async (page) => {
        await logIn(page, origin(site), PASSWORD, '/console/devices');
        const heading = await text(page.locator('#h-ships'));
        expect(heading).toMatch(/^Ships seen since \S+Z: 1,000 ships listed, 1,500 readings of unlisted ships$/);
        since = /since (\S+Z)/.exec(heading)![1]!;
        await expectAllListed(page);
      });
    }

    // A restart keeps the ships and what was left out; the readings per ship count again from the start.
    await site.stop();
    site = await startTestGateway(env);
    for (const { options } of VIEWPORTS) {
      await withPage(options, async (page) => {
        await logIn(page, origin(site), PASSWORD, '/console/devices');
        expect(await text(page.locator('#h-ships'))).toBe(
          `Ships seen since ${since}: 1,000 ships listed, 1,500 readings of unlisted ships`,
        );
        expect(await text(page.locator('#ships thead'))).toMatch(/Readings since the start \d+ s ago/);
        await expectAllListed(page);
        expect(await text(page.locator('#ships tr', { hasText: 'reefer-7' }))).toContain('MV Nordlicht');
      });
    }
  }, 300_000);
});
