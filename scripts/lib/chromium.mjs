// Debian's Chromium for the browser tests, installed by the project's own apt helper when missing,
// and the flags that keep a headless run on this machine: no sandbox (tests run as root), no GPU,
// and nothing that reaches for the network on its own (QUIC, component and sync updates).
import { aptInstall } from './apt.mjs';

export const CHROMIUM = '/usr/bin/chromium';

export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Installs Debian's `chromium` when /usr/bin/chromium is missing; returns its path. */
export function ensureChromium() {
  aptInstall(['chromium'], CHROMIUM);
  return CHROMIUM;
}

/**
 * Options for playwright-core's `chromium.launch`. Playwright gives each launch a fresh
 * `--user-data-dir` of its own in the temporary directory and removes it when the browser closes.
 * @returns {{ executablePath: string, args: string[], headless: true }}
 */
export function chromiumLaunchOptions() {
  return { executablePath: ensureChromium(), args: [...CHROMIUM_FLAGS], headless: true };
}
