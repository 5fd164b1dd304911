import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import axe from 'axe-core';
import { chromium, type Browser, type BrowserContextOptions, type Locator, type Page } from 'playwright-core';
import decodeQR from 'qr/decode.js';
import { expect } from 'vitest';
import { chromiumLaunchOptions } from '../../scripts/lib/chromium.mjs';

/** `npm run console:screenshots` writes the screenshots the docs show; other runs only take them. */
const WRITE_SCREENSHOTS = process.env['CONSOLE_SCREENSHOTS'] === '1';
const SCREENSHOTS = join(import.meta.dirname, '..', '..', 'docs', 'console');

/** A desktop and a phone (an iPhone 12 to 15's CSS size). */
export const VIEWPORTS: { name: 'desktop' | 'phone'; options: BrowserContextOptions }[] = [
  { name: 'desktop', options: { viewport: { width: 1280, height: 900 } } },
  { name: 'phone', options: { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 } },
];

/** Debian's Chromium, headless (installed by the project's apt helper when missing). */
export const launchChromium = (): Promise<Browser> => chromium.launch(chromiumLaunchOptions());

/** The visible text of an element, once it is there. */
// biome-ignore lint/performance/useDomNodeTextContent: a Playwright locator, not a DOM node: its visible text is what a person reads
export const text = (locator: Locator): Promise<string> => locator.innerText();

/** Logs in to the console at `origin` and waits for the page asked for. */
export async function logIn(page: Page, origin: string, password: string, path = '/console/'): Promise<void> {
  await page.goto(`${origin}${path}`);
  await page.fill('#password', password);
  await page.click('button[type=submit]');
  await expect.poll(() => new URL(page.url()).pathname, { timeout: 15_000 }).toBe(path);
  // The address changes when the page starts to arrive: a long one (a thousand ships) is read once all of it is there.
  await page.waitForLoadState('load');
}

/** No serious or critical accessibility violation, as axe-core judges the page. */
export async function expectAccessible(page: Page, what: string): Promise<void> {
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

export async function shoot(page: Page, name: string, fullPage = true): Promise<void> {
  const png = await page.screenshot({ fullPage });
  expect(png.length).toBeGreaterThan(1000);
  if (WRITE_SCREENSHOTS) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    writeFileSync(join(SCREENSHOTS, `${name}.png`), png);
  }
}

/** Reads the QR code on the page back to text, through Chromium's PNG decoder and the qr package's reader. */
export async function readQr(page: Page): Promise<string> {
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
      // The pixels as base64: as an array of numbers, a million of them took seconds to hand over.
      let binary = '';
      for (let i = 0; i < data.data.length; i += 0x8000) binary += String.fromCharCode.apply(null, data.data.subarray(i, i + 0x8000));
      return { width: data.width, height: data.height, data: btoa(binary) };
    })()`)) as { width: number; height: number; data: string };
    return decodeQR({ width: image.width, height: image.height, data: new Uint8Array(Buffer.from(image.data, 'base64')) });
  } finally {
    await blank.close();
  }
}

/**
 * Every cell of every table on the page that a person cannot see without scrolling sideways: its
 * table's id and the cell's text. A table that shows only its first columns on a phone lists the rest.
 */
export async function cellsOffScreen(page: Page): Promise<string[]> {
  return (await page.evaluate(`(() => {
    const width = document.documentElement.clientWidth;
    const hidden = [];
    for (const cell of document.querySelectorAll('main table tbody td, main table tbody th')) {
      const box = cell.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;
      let clipped = box.left < -0.5 || box.right > width + 0.5;
      for (let up = cell.parentElement; up && !clipped; up = up.parentElement) {
        const style = getComputedStyle(up);
        if (style.overflowX === 'visible') continue;
        const outer = up.getBoundingClientRect();
        clipped = box.left < outer.left - 0.5 || box.right > outer.right + 0.5;
      }
      if (clipped) hidden.push((cell.closest('table').id || 'table') + ': ' + cell.innerText.slice(0, 40));
    }
    return hidden;
  })()`)) as string[];
}

/** The height on screen of each chart label (CSS px): what a person can read of the axes. */
export async function chartLabelHeights(page: Page): Promise<number[]> {
  return (await page.evaluate(`Array.from(document.querySelectorAll('figure.chart text, figure.chart .axis-label'))
    .map((label) => label.getBoundingClientRect().height)`)) as number[];
}
