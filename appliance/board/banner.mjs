#!/usr/bin/node
// harbor-banner: what the board's screen shows above the login prompt at every boot, and what the
// local console shows of the releases. The board has no login: the screen is where a technician
// reads the site, the address, the URLs, the HTTPS certificate's fingerprint and the release, on any
// visit. The addresses are agetty's escapes (\4), which it fills in with the address the board has
// when it prints the prompt, and prints again when the address changes. Written at every boot
// (harbor-banner.service) and whenever the release or the settings change.
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bootedSlot } from './boot-state.mjs';
import { writeAtomic } from './files.mjs';
import { GATEWAY_ENV, GATEWAY_UNIT, GRAFANA_UNIT, SAVED_CONFIG } from './firstboot.mjs';
import { UPDATE_DIR, readLast, readTrial, releaseInfo, run } from './records.mjs';
import { previousRelease } from './rollback.mjs';
import { parseConfigText, parseEnvText } from './settings.mjs';
import { unitEnvironment } from './unit.mjs';

export const BANNER = 'run/issue.d/40-harbor.issue';
/** The releases as the local console shows them (world-readable: the gateway runs unprivileged). */
export const RELEASE_STATUS = 'run/harbor-appliance/release.json';

/**
 * @typedef {object} BannerFacts
 * @property {string} site
 * @property {string} hostname
 * @property {string} port          plain HTTP and TLS
 * @property {string} httpsPort
 * @property {string | undefined} fingerprint  SHA-256 of the certificate HTTPS serves
 * @property {boolean} dashboard   an image with Grafana: its dashboard on port 3000
 * @property {{ version: string, slot: string | undefined, trial: boolean }} release
 * @property {{ version: string, slot: string } | { unavailable: string }} previous
 * @property {string | undefined} lastUpdate  the last update's outcome, in words
 */

const read = (/** @type {string} */ path) => (existsSync(path) ? readFileSync(path, 'utf8') : '');

/**
 * What the screen and the console say, read from a root tree as the board has it.
 * @param {{ root?: string, cmdline?: string, updateDir?: string }} [where]
 * @returns {BannerFacts}
 */
export function bannerFacts({ root = '/', cmdline, updateDir = join(root, UPDATE_DIR) } = {}) {
  const at = (/** @type {string} */ path) => join(root, path);
  const unit = read(at(GATEWAY_UNIT));
  const env = { ...unitEnvironment(unit), ...parseEnvText(read(at(GATEWAY_ENV))) };
  const applied = parseConfigText(read(at(SAVED_CONFIG))).values;
  const hostname = read(at('etc/hostname')).trim() || 'harbor';
  // The gateway's state folder as its unit names it: root reaches it there before and after systemd
  // hands it to the service's user (then a link to /var/lib/private).
  const certificate = at(join(env['DATA_DIR'] ?? 'var/lib/harbor-gateway', 'tls/cert.pem'));
  let fingerprint;
  try {
    fingerprint = new X509Certificate(readFileSync(certificate)).fingerprint256;
  } catch {
    fingerprint = undefined;
  }
  const info = releaseInfo(root);
  const booted = bootedSlot(cmdline);
  const last = readLast(updateDir);
  const previous = previousRelease({ booted, pending: readTrial(updateDir), last });
  return {
    site: applied.get('SITE_NAME') ?? '',
    hostname,
    port: env['PORT'] ?? '8000',
    httpsPort: env['HTTPS_PORT'] ?? '8443',
    fingerprint,
    dashboard: existsSync(at(GRAFANA_UNIT)),
    release: { version: info['APPLIANCE_VERSION'] ?? '?', slot: booted.slot, trial: booted.trial },
    previous: 'unavailable' in previous ? previous : { version: previous.version, slot: previous.slot },
    lastUpdate: last === undefined ? undefined : lastUpdateWords(last),
  };
}

/** The last update in a few words. */
function lastUpdateWords(/** @type {import('./records.mjs').Trial} */ last) {
  const when = (last.finishedAt ?? last.startedAt).slice(0, 16).replace('T', ' ');
  const what = last.kind === 'rollback' ? `going back from ${last.from} to ${last.to}` : `${last.from} -> ${last.to}`;
  const outcome = last.status === 'good' ? 'confirmed' : last.status === 'failed' ? 'failed, rolled back' : last.status;
  return `${what}, ${outcome} (${when} UTC)`;
}

/**
 * The screen's text, with agetty's \4 for the board's IPv4 address; every other backslash escaped.
 * @param {BannerFacts} facts
 */
export function renderBanner(facts) {
  const literal = (/** @type {string} */ text) => text.replace(/\\/g, '\\\\');
  const https = (/** @type {string} */ path) => `https://\\4${facts.httpsPort === '443' ? '' : `:${facts.httpsPort}`}${path}`;
  const release = `release ${facts.release.version}, slot ${facts.release.slot ?? '?'}, ${facts.release.trial ? 'on trial: kept once its gateway is ready' : 'committed'}`;
  return [
    `Harbor Gateway ${facts.site === '' ? '' : `"${literal(facts.site)}" `}on ${literal(facts.hostname)} (${release})`,
    `  Address:  \\4  (also ${literal(facts.hostname)}.local)`,
    `  Ingest:   http://\\4:${facts.port}/api/v2/ingest/   ${https('/api/v2/ingest/')}`,
    `  Console:  ${https('/console/')}${facts.dashboard ? '   Dashboard: http://\\4:3000/' : ''}`,
    `  HTTPS certificate SHA-256: ${facts.fingerprint ?? 'made when the gateway first starts; shown in the console and /status'}`,
    ...('unavailable' in facts.previous
      ? []
      : [`  Previous release: ${facts.previous.version} in slot ${facts.previous.slot} (the console can go back to it)`]),
    ...(facts.lastUpdate === undefined ? [] : [`  Last update: ${literal(facts.lastUpdate)}`]),
    '',
    '',
  ].join('\n');
}

/** The console's view of the releases. */
export function releaseStatus(/** @type {BannerFacts} */ facts) {
  return {
    version: facts.release.version,
    slot: facts.release.slot ?? null,
    trial: facts.release.trial,
    previous: 'unavailable' in facts.previous ? null : facts.previous,
    previousUnavailable: 'unavailable' in facts.previous ? facts.previous.unavailable : null,
    lastUpdate: facts.lastUpdate ?? null,
  };
}

/** Writes the screen's text and the console's view, and has the login prompts show the new text. */
export function refreshBanner(root = '/') {
  const facts = bannerFacts({ root });
  writeAtomic(join(root, BANNER), renderBanner(facts));
  writeAtomic(join(root, RELEASE_STATUS), `${JSON.stringify(releaseStatus(facts))}\n`);
  if (root === '/') run('agetty', ['--reload'], { quiet: true });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.umask(0o022);
  try {
    refreshBanner();
  } catch (error) {
    process.stdout.write(`harbor-banner: ${/** @type {Error} */ (error).message}\n`);
    process.exitCode = 1;
  }
}
