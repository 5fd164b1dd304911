#!/usr/bin/node
// harbor-firstboot: applies harbor.conf from the boot partition to the appliance, moves its secrets
// into the root-only files the units of systemd/ load as credentials, sets the gateway's settings in
// /etc/harbor-gateway/gateway.env and removes harbor.conf from the boot partition. Runs early at
// every boot (harbor-firstboot.service) but only acts on the first boot, when a new harbor.conf is
// present, or to delete the one-time credentials file. Never writes a secret to stdout or stderr:
// they end in the journal.
import { spawnSync } from 'node:child_process';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  rmSync,
  statfsSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  SECRETS,
  STORED_SECRETS,
  changeKeyFile,
  defaultHostname,
  envValue,
  parseConfigText,
  parseEnvText,
  parseKeyChanges,
  queueBound,
  queueBytesFromEnv,
  renderApplied,
  renderGatewayEnv,
  renderGrafanaEnv,
  renderHosts,
  renderNetwork,
  renderKeyFile,
  renderTimesyncd,
  renderUpdateEnv,
  setRootDevice,
  setRootReadOnly,
  validateSettings,
} from './settings.mjs';
import { recordAudit } from './audit.mjs';
import { syncDirectory, writeAtomic } from './files.mjs';
import { unitCommand, unitEnvironment } from './unit.mjs';

export const CONFIG_FILE = 'harbor.conf';
export const CREDENTIALS_FILE = 'harbor-credentials.txt';
export const APPLIED_FILE = 'harbor-applied.txt';
export const ERROR_FILE = 'harbor-config-error.txt';
/** Where the units of systemd/ load the credentials from (LoadCredential=), one file per credential. */
export const CREDENTIALS_DIR = 'etc/harbor-gateway/credentials';
/** The gateway unit's EnvironmentFile=. */
export const GATEWAY_ENV = 'etc/harbor-gateway/gateway.env';
/** harbor-grafana.service's EnvironmentFile=: the alert contact settings. */
export const GRAFANA_ENV = 'etc/harbor-gateway/grafana.env';
/** The gateway's unit as installed: its environment and command are what the settings are checked with. */
export const GATEWAY_UNIT = 'etc/systemd/system/harbor-gateway.service';
/** Installed only in an image with Grafana. */
export const GRAFANA_UNIT = 'etc/systemd/system/harbor-grafana.service';
export const MARKER = 'var/lib/harbor-appliance/configured';
/**
 * On the root slot: this slot has had the site's settings applied. A slot an update wrote lacks it,
 * and gets the settings last applied (SAVED_CONFIG, on the data partition) at its first boot.
 */
export const SLOT_MARKER = 'etc/harbor-appliance/slot-configured';
/** harbor.conf as last applied, without secrets (the text of harbor-applied.txt), for the other slot. */
export const SAVED_CONFIG = 'var/lib/harbor-appliance/applied.conf';
/** What harbor-update reads: the central tier's bundle address and the trial's time limit. */
export const UPDATE_ENV = 'etc/harbor-gateway/update.env';
export const ISSUE = 'run/issue.d/50-harbor.issue';
/** The drop-in that adds and revokes device keys by name, leaving the others as they are. */
export const KEYS_FILE = 'harbor-keys.conf';
export const KEYS_APPLIED_FILE = 'harbor-keys-applied.txt';
export const KEYS_ERROR_FILE = 'harbor-keys-error.txt';
/**
 * Grafana applies its admin password credential only when it creates its database; this flag (in
 * RAM, for this boot) makes the appliance's drop-in of harbor-grafana.service store a changed one.
 */
export const GRAFANA_PASSWORD_FLAG = 'run/harbor-appliance/grafana-admin-password-changed';

/** Path (relative to the root) of the file a credential is loaded from. */
export const credentialFile = (/** @type {string} */ name) => join(CREDENTIALS_DIR, name);
/**
 * systemd's credential store, where the gateway unit finds the forwarding sinks' secrets by name
 * (LoadCredential= without a path) and skips one that was never given.
 */
export const CREDSTORE_DIR = 'etc/credstore';
export const credstoreFile = (/** @type {string} */ name) => join(CREDSTORE_DIR, name);
/** Path (relative to the root) of the file one of the generated secrets is kept in. */
export const secretFile = (/** @type {(typeof SECRETS)[number]} */ { credential, store }) =>
  store === 'credstore' ? credstoreFile(credential) : credentialFile(credential);

/**
 * What first boot needs from the running system; a fake stands in for it in tests and when the
 * program is pointed at a root other than /.
 * @typedef {object} System
 * @property {() => string} machineId
 * @property {(path: string) => number} freeBytes     bytes available to unprivileged writers
 * @property {() => void} growVar                     grows the /var partition and file system to the card
 * @property {(name: string) => void} setLiveHostname
 * @property {() => boolean} rootIsReadOnly
 * @property {(mode: 'ro' | 'rw') => void} remountRoot
 * @property {() => string | undefined} rootDevice      the running root as the kernel was told it (root=), if a named one
 * @property {(check: GatewayCheck) => string[]} checkGateway  the gateway's problems with the settings, [] when it accepts them
 * @property {(run: GatewayRun) => string} createCertificate   has the gateway create (or find) its HTTPS certificate; its SHA-256 fingerprint
 * @property {(run: GatewayRun & { entries: AuditEntry[] }) => void} audit  adds entries to the gateway's audit trail (its command `audit record`)
 * @property {(message: string) => void} log
 */
/** @typedef {import('./audit.mjs').AuditEntry} AuditEntry */
/**
 * @typedef {object} GatewayCheck
 * @property {string[]} command                 the unit's program and bundle with the command check-config
 * @property {Record<string, string>} env       the unit's Environment= overlaid with gateway.env
 * @property {Record<string, string>} secrets   credential name -> value, as LoadCredential= will hand them over
 */

/**
 * @typedef {object} GatewayRun
 * @property {string[]} command                 the unit's program and bundle with a command of the gateway
 * @property {Record<string, string>} env       the unit's Environment= overlaid with gateway.env
 */

/**
 * @param {{ root: string, boot: string, system: System, now?: Date, newSecret?: () => string }} options
 * @returns {{ status: 'applied' | 'unchanged' | 'invalid', problems: string[], generated: string[] }}
 */
export function firstBoot({ root, boot, system, now = new Date(), newSecret = () => randomBytes(24).toString('base64url') }) {
  const at = (/** @type {string} */ path) => join(root, path);
  const configPath = join(boot, CONFIG_FILE);
  const configured = existsSync(at(MARKER));

  // The generated secrets are shown for one boot: whoever could read them has had the chance.
  if (existsSync(join(boot, CREDENTIALS_FILE))) {
    wipe(join(boot, CREDENTIALS_FILE));
    system.log(`removed ${CREDENTIALS_FILE} from the boot partition`);
  }
  const hasConfig = existsSync(configPath);
  const slotConfigured = existsSync(at(SLOT_MARKER));
  if (configured && !hasConfig && slotConfigured) return { status: 'unchanged', problems: [], generated: [] };
  // A slot an update wrote, on a configured card: the settings last applied, secrets kept as they are.
  const savedPath = at(SAVED_CONFIG);
  const fromSaved = configured && !hasConfig && existsSync(savedPath);
  if (fromSaved) system.log(`this slot has not had the site's settings yet: applying ${SAVED_CONFIG}`);
  else if (configured && !hasConfig) return { status: 'unchanged', problems: [], generated: [] };

  const parsed = parseConfigText(hasConfig ? readFileSync(configPath, 'utf8') : fromSaved ? readFileSync(savedPath, 'utf8') : '');
  const { settings, problems } = validateSettings(parsed.values, {
    zoneExists: (zone) => isFile(at(join('usr/share/zoneinfo', zone))),
  });
  problems.unshift(...parsed.problems);

  if (!configured) system.growVar();
  const envPath = at(GATEWAY_ENV);
  const currentEnv = existsSync(envPath) ? readFileSync(envPath, 'utf8') : '';
  const bound = queueBound({
    requested: settings.queueMaxBytes,
    current: queueBytesFromEnv(currentEnv),
    freeBytes: system.freeBytes(at('var/lib')),
  });
  if ('problem' in bound) problems.push(bound.problem);

  // The secrets as they will be: from harbor.conf, else kept, else generated.
  /** @type {Record<string, string>} */
  const secrets = {};
  /** @type {Record<string, string | undefined>} */
  const currentSecrets = {};
  /** @type {string[]} */
  const generated = [];
  /** @type {string[]} */
  const shown = [];
  // An image built without Grafana still writes its password (the gateway's unit loads it), but the
  // screen and the boot partition name neither Grafana's address nor a password nothing asks for.
  const withGrafana = existsSync(at(GRAFANA_UNIT));
  for (const secret of SECRETS) {
    const { key, field, credential } = secret;
    const path = at(secretFile(secret));
    currentSecrets[credential] = existsSync(path) ? readFileSync(path, 'utf8').trim() : undefined;
    let value = settings[field] ?? currentSecrets[credential];
    if (value === undefined) {
      value = newSecret();
      generated.push(key);
      if (withGrafana || key !== 'GRAFANA_ADMIN_PASSWORD') shown.push(`${key}=${value}`);
    }
    secrets[credential] = value;
  }
  // The forwarding sinks' secrets and the /metrics token: from harbor.conf, else kept; none while never given.
  for (const { credential } of STORED_SECRETS) {
    const path = at(credstoreFile(credential));
    currentSecrets[credential] = existsSync(path) ? readFileSync(path, 'utf8').trim() : undefined;
    const secret = settings.storedSecrets[credential] ?? currentSecrets[credential];
    if (secret !== undefined) secrets[credential] = secret;
  }
  const hostname = settings.hostname ?? defaultHostname(system.machineId());
  const gatewayEnv = renderGatewayEnv({
    current: currentEnv,
    settings,
    hostname,
    queueMaxBytes: 'bytes' in bound ? bound.bytes : undefined,
  });

  // The gateway checks its own settings exactly as it will start with them: the unit's environment,
  // gateway.env, the credentials. Its rules (production secrets, HARBOR_ID, sizes) live in one place.
  const unit = readFileSync(at(GATEWAY_UNIT), 'utf8');
  const command = unitCommand(unit);
  const program = command.at(-1) === 'serve' ? command.slice(0, -1) : command;
  const unitEnv = { ...unitEnvironment(unit), ...parseEnvText(gatewayEnv) };
  problems.push(...system.checkGateway({ command: [...program, 'check-config'], env: unitEnv, secrets }));

  const audit = (/** @type {AuditEntry[]} */ entries) => system.audit({ command: [...program, 'audit', 'record'], env: unitEnv, entries });
  if ((problems.length > 0 || !('bytes' in bound)) && fromSaved) {
    // Settings this card applied before, refused by this slot's release: its fault, not harbor.conf's.
    // Nothing goes to the boot partition, where it would send the technician to a file that is fine;
    // the trial fails and the report after it says why.
    writeAtomic(at(ISSUE), `Harbor Gateway: this release could not apply the site's settings: ${problems.join('; ')}\n\n`, 0o600);
    system.log(`the site's settings were not applied to this slot: ${problems.join('; ')}`);
    audit([
      {
        action: 'settings_applied',
        outcome: 'failed',
        actor: 'harbor.conf',
        detail: `this release could not apply the settings last applied: ${problems.length} problem(s), on the screen`,
      },
    ]);
    return { status: 'invalid', problems, generated: [] };
  }
  if (problems.length > 0 || !('bytes' in bound)) {
    writeAtomic(
      join(boot, ERROR_FILE),
      [`harbor.conf was not applied (${now.toISOString()}). Fix these lines and boot again:`, ...problems.map((p) => `- ${p}`), ''].join(
        '\r\n',
      ),
    );
    writeAtomic(at(ISSUE), `Harbor Gateway: harbor.conf was not applied; see ${ERROR_FILE} on the boot partition.\n\n`, 0o600);
    system.log(`harbor.conf not applied: ${problems.length} problem(s), listed in ${ERROR_FILE} on the boot partition`);
    audit([
      {
        action: 'settings_applied',
        outcome: 'refused',
        actor: 'harbor.conf',
        detail: `${problems.length} problem(s), listed in ${ERROR_FILE} on the boot partition`,
      },
    ]);
    return { status: 'invalid', problems, generated: [] };
  }

  const wasReadOnly = system.rootIsReadOnly();
  if (wasReadOnly) system.remountRoot('rw');
  try {
    writeAtomic(at('etc/hostname'), `${hostname}\n`);
    writeAtomic(at('etc/hosts'), renderHosts(hostname));
    writeAtomic(at('etc/machine-info'), settings.siteName ? `PRETTY_HOSTNAME=${envValue(settings.siteName)}\n` : '');
    system.setLiveHostname(hostname);

    replaceSymlink(at('etc/localtime'), `/usr/share/zoneinfo/${settings.timezone}`);
    writeAtomic(at('etc/timezone'), `${settings.timezone}\n`);
    const timesyncd = renderTimesyncd(settings.ntpServers);
    const timesyncdPath = at('etc/systemd/timesyncd.conf.d/10-harbor.conf');
    if (timesyncd === undefined) rmSync(timesyncdPath, { force: true });
    else writeAtomic(timesyncdPath, timesyncd);
    writeAtomic(at('etc/systemd/network/10-harbor.network'), renderNetwork(settings.network));

    for (const dir of [CREDENTIALS_DIR, CREDSTORE_DIR]) {
      mkdirSync(at(dir), { recursive: true });
      chmodSync(at(dirname(dir)), 0o755);
      chmodSync(at(dir), 0o700);
    }
    for (const entry of SECRETS) {
      const { key, credential } = entry;
      const secret = String(secrets[credential]);
      const current = currentSecrets[credential];
      if (secret === current) continue;
      // One value, no line end: QuestDB's unit reads it with the shell, Grafana and the gateway as a file.
      writeAtomic(at(secretFile(entry)), secret, 0o600);
      if (key === 'GRAFANA_ADMIN_PASSWORD' && current !== undefined) writeAtomic(at(GRAFANA_PASSWORD_FLAG), '', 0o600);
      system.log(`${key} ${generated.includes(key) ? 'generated' : 'set from harbor.conf'}`);
    }
    for (const { key, credential } of STORED_SECRETS) {
      const secret = secrets[credential];
      if (secret === undefined || secret === currentSecrets[credential]) continue;
      writeAtomic(at(credstoreFile(credential)), secret, 0o600);
      system.log(`${key} set from harbor.conf`);
    }

    writeAtomic(envPath, gatewayEnv);
    writeAtomic(at(GRAFANA_ENV), renderGrafanaEnv(settings.alerts));
    writeAtomic(at(UPDATE_ENV), renderUpdateEnv(settings.update));
    const fstab = at('etc/fstab');
    if (existsSync(fstab)) {
      const device = system.rootDevice();
      const text = setRootReadOnly(readFileSync(fstab, 'utf8'), settings.readOnlyRoot);
      writeAtomic(fstab, device === undefined ? text : setRootDevice(text, device));
    }
    writeAtomic(at(MARKER), `${now.toISOString()}\n`);
    const applied = renderApplied({ settings, hostname, queueMaxBytes: bound.bytes, appliedAt: now });
    writeAtomic(savedPath, applied, 0o600);
    writeAtomic(at(SLOT_MARKER), `${now.toISOString()}\n`);

    if (hasConfig) wipe(configPath);
    rmSync(join(boot, ERROR_FILE), { force: true });
    writeAtomic(join(boot, APPLIED_FILE), applied);
    if (shown.length > 0) {
      writeAtomic(
        join(boot, CREDENTIALS_FILE),
        [
          `Generated on ${now.toISOString()} by ${hostname}. This file is deleted at the next boot:`,
          'note these values now. Sensors send API_KEY in the X-API-Key header; the console at',
          `https://${hostname}.local/console/ takes CONSOLE_PASSWORD${withGrafana ? '; Grafana user is admin' : ''}.`,
          ...shown,
          '',
        ].join('\r\n'),
      );
    }
    // The certificate the gateway will serve, made now so its fingerprint is on the console before
    // a technician sets up the first device; the gateway makes it itself at start if this fails.
    let fingerprint;
    try {
      fingerprint = system.createCertificate({ command: [...program, 'tls-certificate', '--fingerprint'], env: unitEnv });
      system.log(`HTTPS certificate SHA-256 ${fingerprint}`);
    } catch (error) {
      system.log(`could not create the HTTPS certificate now (the gateway creates it at start): ${/** @type {Error} */ (error).message}`);
    }
    /** @type {AuditEntry[]} */
    const changes = [];
    if (settings.deviceKeys !== undefined) {
      const keyPath = at(unitEnv['API_KEYS_FILE'] ?? join(unitEnv['DATA_DIR'] ?? 'var/lib/harbor-gateway', 'api-keys'));
      changes.push(...deviceKeyChanges(existsSync(keyPath) ? readFileSync(keyPath, 'utf8') : '', settings.deviceKeys));
      const keyFile = writeDeviceKeys(keyPath, settings.deviceKeys);
      system.log(`device keys: ${settings.deviceKeys.length} from harbor.conf in ${keyFile}`);
    }
    // The screen's banner (banner.mjs, at every boot) names the site, the addresses and the
    // certificate; this adds what is shown once.
    if (shown.length > 0)
      writeAtomic(
        at(ISSUE),
        [`Generated on this first boot, shown until the next reboot (CONSOLE_PASSWORD opens the console):`, ...shown, '', ''].join('\n'),
        0o600,
      );
    else rmSync(at(ISSUE), { force: true });
    system.log(`harbor.conf applied: hostname ${hostname}, queue bound ${bound.bytes} bytes, network ${settings.network.mode}`);
    audit([
      ...changes,
      {
        action: 'settings_applied',
        outcome: 'ok',
        actor: 'harbor.conf',
        subject: hostname,
        detail: [
          hasConfig ? `harbor.conf from the boot partition` : `the settings last applied, on a slot an update wrote`,
          `queue bound ${bound.bytes} bytes`,
          `network ${settings.network.mode}`,
          ...(generated.length > 0 ? [`generated ${generated.join(', ')}`] : []),
        ].join('; '),
      },
    ]);
  } finally {
    if (settings.readOnlyRoot) system.remountRoot('ro');
  }
  return { status: 'applied', problems: [], generated };
}

/**
 * Runs the gateway's check-config (the checks serve makes; exit status 78 and one line per bad
 * setting) with the secrets in a private folder under scratch as its credentials directory. The
 * folder is deleted after the check; nothing of it reaches the output.
 * @param {GatewayCheck & { scratch: string }} check
 * @returns {string[]} the problems the gateway names, [] when it accepts the settings
 */
export function checkGatewayConfig({ command, env, secrets, scratch }) {
  mkdirSync(scratch, { recursive: true });
  const dir = mkdtempSync(join(scratch, 'harbor-firstboot-'));
  try {
    for (const [name, secret] of Object.entries(secrets)) writeFileSync(join(dir, name), secret, { mode: 0o600 });
    const [program, ...args] = command;
    const result = spawnSync(String(program), args, {
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env, CREDENTIALS_DIRECTORY: dir },
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (result.status === 0) return [];
    const stderr = result.stderr ?? '';
    if (result.status === 78) {
      const named = stderr
        .split('\n')
        .filter((line) => line.startsWith('  '))
        .map((line) => line.trim());
      return named.length > 0 ? named : [stderr.trim()];
    }
    return [`the gateway could not check the settings (${result.error?.message ?? `exit status ${result.status ?? result.signal}`})`];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Runs the gateway's tls-certificate command, which creates the self-signed certificate in
 * DATA_DIR/tls unless one is configured, and returns the fingerprint it prints. On the board the
 * files are root's until the gateway's service starts: systemd hands its state directory,
 * contents included, to the service's user.
 * @param {GatewayRun} run
 */
export function createGatewayCertificate({ command, env }) {
  const [program, ...args] = command;
  const result = spawnSync(String(program), args, {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env },
    encoding: 'utf8',
    timeout: 120_000,
  });
  const fingerprint = (result.stdout ?? '').trim();
  if (result.status !== 0 || !/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/.test(fingerprint)) {
    throw new Error(`${(result.stderr ?? '').trim() || result.error?.message || `exit status ${result.status ?? result.signal}`}`);
  }
  return fingerprint;
}

/**
 * The gateway's device key file from harbor.conf's DEVICE_KEYS, replacing what it held. The gateway
 * reads it as the user systemd makes up for it (DynamicUser): the file gets the owner of the folder
 * it is in, which systemd gave that user; a folder the gateway never ran on is still root's, and
 * systemd hands it over with its contents when the service first starts.
 * @param {string} path
 * @param {import('./settings.mjs').DeviceKey[]} keys
 */
export function writeDeviceKeys(path, keys) {
  // A key the file holds already keeps its line: the gateway sees it unchanged, and its open
  // MQTT sessions go on.
  const held = keyFileHashes(existsSync(path) ? readFileSync(path, 'utf8') : '');
  const kept = new Map(
    keys.flatMap(({ name, key }) => (held.has(name) && keyHashMatches(String(held.get(name)), key) ? [[key, String(held.get(name))]] : [])),
  );
  writeKeyText(
    path,
    renderKeyFile(keys, (key) => kept.get(key) ?? hashDeviceKey(key)),
  );
  return path;
}

/** The key file's text, owned as its folder (see writeDeviceKeys). */
function writeKeyText(/** @type {string} */ path, /** @type {string} */ text) {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o750 });
  const owner = statSync(dir);
  writeAtomic(path, text, 0o600);
  if (process.getuid?.() === 0) chownSync(path, owner.uid, owner.gid);
}

/**
 * harbor-keys.conf on the boot partition: the device keys it adds and revokes, the others kept. The
 * file holds keys: it is wiped once applied, and what was done (names only) is in
 * harbor-keys-applied.txt; a file with a mistake changes nothing and stays, with
 * harbor-keys-error.txt saying what to fix.
 * Each change, and a refused file, is an entry of the gateway's audit trail (actor harbor-keys.conf).
 * @param {{ root: string, boot: string, system: Pick<System, 'log' | 'audit'>, now?: Date }} options
 * @returns {'applied' | 'invalid' | 'none'}
 */
export function applyKeyChanges({ root, boot, system, now = new Date() }) {
  const file = join(boot, KEYS_FILE);
  if (!existsSync(file)) return 'none';
  const changes = parseKeyChanges(readFileSync(file, 'utf8'));
  const unit = readFileSync(join(root, GATEWAY_UNIT), 'utf8');
  const envPath = join(root, GATEWAY_ENV);
  const env = { ...unitEnvironment(unit), ...(existsSync(envPath) ? parseEnvText(readFileSync(envPath, 'utf8')) : {}) };
  const command = unitCommand(unit);
  const program = command.at(-1) === 'serve' ? command.slice(0, -1) : command;
  const audit = (/** @type {AuditEntry[]} */ entries) => system.audit({ command: [...program, 'audit', 'record'], env, entries });
  const actor = KEYS_FILE;
  if (changes.problems.length > 0) {
    writeAtomic(
      join(boot, KEYS_ERROR_FILE),
      [
        `${KEYS_FILE} was not applied (${now.toISOString()}); no key was changed. Fix these lines and boot again:`,
        ...changes.problems.map((p) => `- ${p}`),
        '',
      ].join('\r\n'),
    );
    system.log(`${KEYS_FILE} not applied: ${changes.problems.length} problem(s), listed in ${KEYS_ERROR_FILE}`);
    audit([
      {
        action: 'settings_applied',
        outcome: 'refused',
        actor,
        detail: `${changes.problems.length} problem(s), listed in ${KEYS_ERROR_FILE} on the boot partition; no key changed`,
      },
    ]);
    return 'invalid';
  }
  const path = join(root, env['API_KEYS_FILE'] ?? join(env['DATA_DIR'] ?? 'var/lib/harbor-gateway', 'api-keys'));
  const changed = changeKeyFile(existsSync(path) ? readFileSync(path, 'utf8') : '', changes, hashDeviceKey);
  writeKeyText(path, changed.text);
  wipe(file);
  rmSync(join(boot, KEYS_ERROR_FILE), { force: true });
  const said = [
    ...changed.added.map((name) => `added ${name}`),
    ...changed.replaced.map((name) => `new key for ${name}`),
    ...changed.revoked.map((name) => `revoked ${name}`),
    ...changed.unknown.map((name) => `no key named ${name} to revoke`),
  ];
  writeAtomic(join(boot, KEYS_APPLIED_FILE), [`${KEYS_FILE} applied on ${now.toISOString()}:`, ...said, ''].join('\r\n'));
  system.log(`${KEYS_FILE} applied: ${said.join(', ')}`);
  const prefixOf = new Map(changes.add.map(({ name, shipPrefix }) => [name, shipPrefix]));
  audit([
    ...changed.replaced.flatMap((name) => [
      /** @type {AuditEntry} */ ({ action: 'key_revoked', outcome: 'ok', actor, subject: name, detail: `replaced by ${KEYS_FILE}` }),
      /** @type {AuditEntry} */ ({ action: 'key_added', outcome: 'ok', actor, subject: name, detail: keyLimits(prefixOf.get(name)) }),
    ]),
    ...changed.added.map(
      (name) =>
        /** @type {AuditEntry} */ ({ action: 'key_added', outcome: 'ok', actor, subject: name, detail: keyLimits(prefixOf.get(name)) }),
    ),
    ...changed.revoked.map(
      (name) =>
        /** @type {AuditEntry} */ ({ action: 'key_revoked', outcome: 'ok', actor, subject: name, detail: `revoked in ${KEYS_FILE}` }),
    ),
  ]);
  return 'applied';
}

/** What a device key may write, as an audit entry says it. */
const keyLimits = (/** @type {string | undefined} */ prefix) => (prefix === undefined ? 'all ships' : `ships starting with ${prefix}`);

/**
 * The audit entries of replacing a key file's keys with DEVICE_KEYS: keys added, keys revoked
 * (gone from DEVICE_KEYS, or given a new key or ship prefix, which is a revocation and an addition).
 * @param {string} current  the key file as it is
 * @param {import('./settings.mjs').DeviceKey[]} keys
 * @returns {AuditEntry[]}
 */
export function deviceKeyChanges(current, keys) {
  const held = keyFileLines(current);
  /** @type {AuditEntry[]} */
  const entries = [];
  for (const { name, key, shipPrefix } of keys) {
    const before = held.get(name);
    if (before !== undefined && keyHashMatches(before.hash, key) && before.shipPrefix === shipPrefix) continue;
    if (before !== undefined)
      entries.push({ action: 'key_revoked', outcome: 'ok', actor: 'harbor.conf', subject: name, detail: 'replaced by DEVICE_KEYS' });
    entries.push({ action: 'key_added', outcome: 'ok', actor: 'harbor.conf', subject: name, detail: keyLimits(shipPrefix) });
  }
  const given = new Set(keys.map(({ name }) => name));
  for (const name of held.keys())
    if (!given.has(name))
      entries.push({ action: 'key_revoked', outcome: 'ok', actor: 'harbor.conf', subject: name, detail: 'not in DEVICE_KEYS' });
  return entries;
}

/**
 * The entries of a key file (src/keys/key-file.ts's lines: name, hash, optional prefix, optional site=).
 * @param {string} text
 */
function keyFileLines(text) {
  /** @type {Map<string, { hash: string, shipPrefix: string | undefined }>} */
  const lines = new Map();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const [name, hash, ...options] = line.split(/\s+/);
    if (name === undefined || hash === undefined) continue;
    lines.set(name, { hash, shipPrefix: options.find((o) => !o.startsWith('site=')) });
  }
  return lines;
}

const keyFileHashes = (/** @type {string} */ text) => new Map([...keyFileLines(text)].map(([name, { hash }]) => [name, hash]));

/** Whether a stored hash is of this key (src/keys/key-hash.ts keyMatches). */
export function keyHashMatches(/** @type {string} */ hash, /** @type {string} */ key) {
  const [scheme, salt, mac] = hash.split('$');
  if (scheme !== 'hmac-sha256' || salt === undefined || mac === undefined) return false;
  const expected = Buffer.from(mac, 'base64url');
  const actual = createHmac('sha256', Buffer.from(salt, 'base64url')).update(key, 'utf8').digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** The key's salted HMAC-SHA256 in the gateway's form (src/keys/key-hash.ts): hmac-sha256$salt$mac. */
export function hashDeviceKey(/** @type {string} */ key) {
  const salt = randomBytes(16);
  return `hmac-sha256$${salt.toString('base64url')}$${createHmac('sha256', salt).update(key, 'utf8').digest('base64url')}`;
}

/** Overwrites a file's bytes with zeros before deleting it, so its secrets do not linger in free clusters. */
function wipe(/** @type {string} */ path) {
  const size = statSync(path).size;
  const fd = openSync(path, 'r+');
  try {
    if (size > 0) writeSync(fd, Buffer.alloc(size), 0, size, 0);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  rmSync(path);
  syncDirectory(dirname(path));
}

function replaceSymlink(/** @type {string} */ path, /** @type {string} */ target) {
  rmSync(path, { force: true });
  mkdirSync(dirname(path), { recursive: true });
  symlinkSync(target, path);
}

const isFile = (/** @type {string} */ path) => {
  try {
    return lstatSync(path).isFile() || statSync(path).isFile();
  } catch {
    return false;
  }
};

const log = (/** @type {string} */ message) => process.stdout.write(`${message}\n`);

/** @returns {System} the running board, for root "/" */
export function boardSystem() {
  const run = (/** @type {string} */ command, /** @type {string[]} */ args) => {
    const result = spawnSync(command, args, { encoding: 'utf8' });
    return { ok: result.status === 0, output: `${result.stdout ?? ''}${result.stderr ?? ''}`.trim() };
  };
  const mountOf = (/** @type {string} */ mountPoint) =>
    readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((line) => line.split(' '))
      .filter((fields) => fields[4] === mountPoint)
      .at(-1);
  return {
    machineId: () => readFileSync('/etc/machine-id', 'utf8'),
    freeBytes: (path) => {
      const stats = statfsSync(path);
      return stats.bavail * stats.bsize;
    },
    growVar: () => {
      // /var is the last partition of the card: grow it, then its ext4 online, to fill the card.
      const fields = mountOf('/var');
      const source = fields?.[fields.indexOf('-') + 2];
      if (source === undefined || !source.startsWith('/dev/')) {
        log('/var is not a partition; nothing to grow');
        return;
      }
      const partition = source.slice('/dev/'.length);
      const number = readFileSync(`/sys/class/block/${partition}/partition`, 'utf8').trim();
      // /sys/class/block/vda3 links into its disk's folder (.../block/vda/vda3).
      const disk = basename(dirname(realpathSync(`/sys/class/block/${partition}`)));
      const grown = run('growpart', [`/dev/${disk}`, number]);
      if (!grown.ok && !grown.output.includes('NOCHANGE')) {
        log(`growpart failed: ${grown.output}`);
        return;
      }
      const resized = run('resize2fs', [source]);
      log(resized.ok ? `grew ${source} to the size of the card` : `resize2fs failed: ${resized.output}`);
    },
    setLiveHostname: (name) => writeFileSync('/proc/sys/kernel/hostname', name),
    rootIsReadOnly: () => String(mountOf('/')?.[5]).split(',').includes('ro'),
    rootDevice: () => /(?:^|\s)root=((?:PARTUUID|UUID|LABEL)=\S+)/.exec(readFileSync('/proc/cmdline', 'utf8'))?.[1],
    remountRoot: (mode) => {
      const result = run('mount', ['-o', `remount,${mode}`, '/']);
      if (!result.ok) throw new Error(`cannot remount / ${mode}: ${result.output}`);
    },
    // /run is in RAM: the candidate secrets never touch the card before they are accepted.
    checkGateway: (check) => checkGatewayConfig({ ...check, scratch: '/run' }),
    createCertificate: createGatewayCertificate,
    audit: ({ entries, ...run }) => void recordAudit(entries, { ...run, log }),
    log,
  };
}

/** @returns {System} a root tree other than the running system: nothing outside the tree is touched */
export function treeSystem(/** @type {string} */ root) {
  return {
    machineId: () => (existsSync(join(root, 'etc/machine-id')) ? readFileSync(join(root, 'etc/machine-id'), 'utf8') : ''),
    freeBytes: (path) => {
      const stats = statfsSync(existsSync(path) ? path : root);
      return stats.bavail * stats.bsize;
    },
    growVar: () => {},
    setLiveHostname: () => {},
    rootIsReadOnly: () => false,
    remountRoot: () => {},
    rootDevice: () => undefined,
    // The running system's Node and bundle (the tree is a card's root, not one that runs).
    checkGateway: (check) => checkGatewayConfig({ ...check, scratch: join(root, 'run') }),
    // The certificate goes into the tree's state directory.
    createCertificate: (run) =>
      createGatewayCertificate({ ...run, env: { ...run.env, DATA_DIR: join(root, run.env['DATA_DIR'] ?? 'var/lib/harbor-gateway') } }),
    audit: ({ entries, ...run }) =>
      void recordAudit(entries, {
        ...run,
        env: { ...run.env, DATA_DIR: join(root, run.env['DATA_DIR'] ?? 'var/lib/harbor-gateway') },
        log,
      }),
    log,
  };
}

function main() {
  const args = process.argv.slice(2);
  const flag = (/** @type {string} */ name, /** @type {string} */ fallback) => {
    const index = args.indexOf(name);
    return index >= 0 && args[index + 1] !== undefined ? String(args[index + 1]) : fallback;
  };
  // Files first boot writes are read by unprivileged services (networkd, timesyncd): 0644 and 0755
  // unless a mode is given, whatever umask the caller had. Secrets get 0600 explicitly.
  process.umask(0o022);
  const root = resolve(flag('--root', '/'));
  const boot = resolve(flag('--boot', join(root, 'boot/firmware')));
  try {
    const system = root === '/' ? boardSystem() : treeSystem(root);
    const result = firstBoot({ root, boot, system });
    const keys = applyKeyChanges({ root, boot, system });
    process.exitCode = result.status === 'invalid' || keys === 'invalid' ? 1 : 0;
  } catch (error) {
    log(`harbor-firstboot failed: ${/** @type {Error} */ (error).message}`);
    process.exitCode = 2;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
