// Debian's Chromium for the browser tests, installed by the project's own apt helper when missing,
// and the flags that keep a headless run on this machine: no sandbox (tests run as root), no GPU,
// and nothing that reaches for the network on its own (QUIC, component and sync updates).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { aptInstall } from './apt.mjs';

export const CHROMIUM = '/usr/bin/chromium';

const FLAGS = [
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
 * Launch options for playwright-core's `chromium.launch`, with a fresh profile directory of its
 * own; call `cleanup()` once the browser is closed.
 * @returns {{ executablePath: string, args: string[], cleanup: () => void }}
 */
export function chromiumLaunchOptions() {
  const profile = mkdtempSync(join(tmpdir(), 'chromium-profile-'));
  return {
    executablePath: ensureChromium(),
    args: [...FLAGS, `--user-data-dir=${profile}`],
    cleanup: () => rmSync(profile, { recursive: true, force: true }),
  };
}
