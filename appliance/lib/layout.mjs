// Where the project's files go in the appliance's root: the layout of the units in systemd/ and of
// the README's "Installing the systemd units on a Debian-based board", so that a flashed card runs
// the same units as any Debian board. The image build and the emulated check both use it.
import { copyFileSync, cpSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './host.mjs';

/** The gateway's home: dist/gateway.mjs, node_modules/better-sqlite3, questdb/, grafana/, README.md. */
export const GATEWAY_HOME = 'opt/harbor-gateway';
export const QUESTDB_JAR = `${GATEWAY_HOME}/questdb/questdb.jar`;
export const UNIT_DIR = 'etc/systemd/system';

/** The units of systemd/ the appliance runs; Grafana's only when the image has Grafana. */
export const projectUnits = (/** @type {boolean} */ withGrafana) => [
  'harbor-gateway.service',
  'harbor-questdb.service',
  ...(withGrafana ? ['harbor-grafana.service'] : []),
];

/**
 * Installs the units, QuestDB's sysctl drop-in and the annotated gateway.env from systemd/ into a
 * root tree, where the README's install steps put them.
 * @param {string} root
 * @param {{ withGrafana: boolean }} options
 */
export function installSystemdFiles(root, { withGrafana }) {
  const from = (/** @type {string} */ name) => {
    const path = join(repoRoot, 'systemd', name);
    if (!existsSync(path)) throw new Error(`systemd/${name} is missing: the appliance runs the units of systemd/`);
    return path;
  };
  mkdirSync(join(root, UNIT_DIR), { recursive: true });
  for (const unit of projectUnits(withGrafana)) copyFileSync(from(unit), join(root, UNIT_DIR, unit));
  mkdirSync(join(root, 'etc/sysctl.d'), { recursive: true });
  copyFileSync(from('60-harbor-questdb.conf'), join(root, 'etc/sysctl.d/60-harbor-questdb.conf'));
  mkdirSync(join(root, 'etc/harbor-gateway'), { recursive: true, mode: 0o755 });
  copyFileSync(from('gateway.env'), join(root, 'etc/harbor-gateway/gateway.env'));
}

/** Grafana's provisioning (data source, dashboard) where harbor-grafana.service reads it. */
export function installGrafanaProvisioning(/** @type {string} */ root) {
  const source = join(repoRoot, 'grafana/provisioning');
  if (!existsSync(source)) throw new Error('grafana/provisioning is missing: Grafana would start without data source and dashboard');
  cpSync(source, join(root, GATEWAY_HOME, 'grafana/provisioning'), { recursive: true });
}
