import type { Context, Hono } from 'hono';
import { checkConfig } from '../../config/check-config.js';
import { SETTINGS } from '../../config/settings.js';
import type { GatewayConsole } from '../gateway-console.js';
import { Devices } from '../pages/devices.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { Overview } from '../pages/overview.js';
import { Settings, type SettingRow } from '../pages/settings.js';
import { renderPage, sessionFrame } from '../render.js';
import { requestHostname } from '../request-facts.js';
import { gatewayAddresses, httpsUrl, type GatewayAddresses } from '../console-addresses.js';
import type { UpdateInstaller } from '../update-bundle.js';

/** Seconds between refreshes of the overview and devices pages (by the script; without it, a reload). */
const REFRESH_S = 10;

/** Where devices and browsers reach the gateway over HTTPS, as this request tells it. */
export const addressesFor = (c: Context, console: GatewayConsole): GatewayAddresses =>
  gatewayAddresses(console.deps.listenHost, requestHostname(c));

/** The settings as the environment gave them at start; a secret shows only whether it is set. */
export function settingRows(env: Record<string, string | undefined>): SettingRow[] {
  return Object.values(SETTINGS).map((setting) => {
    const value = env[setting.env] === '' ? undefined : env[setting.env];
    const secret = 'secret' in setting && setting.secret === true;
    if (value !== undefined) return { env: setting.env, shown: secret ? 'set (not shown)' : value, origin: 'environment', secret };
    if (setting.default !== undefined) return { env: setting.env, shown: setting.default, origin: 'default', secret };
    return { env: setting.env, shown: '', origin: 'unset', secret };
  });
}

export function registerPageRoutes(app: Hono, console: GatewayConsole): void {
  const settings = settingRows(console.deps.env);
  const frame = (c: Context, page: 'overview' | 'devices' | 'settings', title: string, refreshS?: number) =>
    sessionFrame(c, console.deps.version, page, title, refreshS === undefined ? {} : { refreshS });

  // Paths are matched without their trailing slash: this is /console/ too.
  app.get(CONSOLE_PATH, (c) => {
    const now = Date.now();
    const snapshot = console.snapshot(now);
    const addresses = addressesFor(c, console);
    const model = {
      state: console.state(snapshot, now),
      snapshot,
      minutes: console.minutes.series(now),
      refused: console.refusals.byStatusSorted(),
      httpsUrls: addresses.hosts.map((host) => `${httpsUrl(host, console.httpsPort)}/`),
      thisMachineOnly: addresses.thisMachineOnly,
      listenHost: console.deps.listenHost,
      csrf: c.get('consoleSession').csrf,
    };
    return renderPage(c, frame(c, 'overview', 'Overview', REFRESH_S), <Overview {...model} />);
  });

  app.get(`${CONSOLE_PATH}/devices`, (c) => {
    const now = Date.now();
    const names = console.deps.catalogue.catalogue.ships;
    const model = {
      ships: console.ships.list(now).map((ship) => ({ ...ship, name: names.get(ship.shipId) })),
      table: console.ships.facts(),
      refusals: console.refusals.keys(),
      wrongKeys: console.refusals.wrongKeys(),
      now,
    };
    return renderPage(c, frame(c, 'devices', 'Devices', REFRESH_S), <Devices {...model} />);
  });

  app.get(`${CONSOLE_PATH}/settings`, (c) => {
    const { pem: _pem, ...certificate } = console.deps.certificate();
    const model = {
      certificate,
      settings,
      check: checkConfig(console.deps.env),
      update: updateFacts(console.updateInstaller()),
      csrf: c.get('consoleSession').csrf,
    };
    return renderPage(c, frame(c, 'settings', 'Certificate and settings'), <Settings {...model} />);
  });

  app.get(`${CONSOLE_PATH}/certificate.pem`, (c) =>
    c.body(console.deps.certificate().pem, 200, {
      'Content-Type': 'application/x-pem-file',
      'Content-Disposition': 'attachment; filename="harbor-gateway.pem"',
    }),
  );
}

const updateFacts = (installer: UpdateInstaller | undefined) =>
  installer === undefined ? undefined : { description: installer.description, releases: installer.releases() };
