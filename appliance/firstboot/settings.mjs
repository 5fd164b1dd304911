// The appliance's boot-partition config file (harbor.conf): parsing, validation and the text of
// the files it turns into. Pure functions only, so the rules are unit-tested on any machine; the
// effects live in firstboot.mjs. Runs on the board's Node (Debian's nodejs 20), no dependencies.
import { isIP } from 'node:net';

/** @typedef {{ mode: 'dhcp' } | { mode: 'static', address: string, gateway: string | undefined, dns: string[] }} Network */
/**
 * @typedef {object} Settings
 * @property {string} siteName                 free text shown on the console and in health rows ('' = none)
 * @property {string | undefined} hostname     undefined: derived from the machine id
 * @property {string | undefined} apiKey       undefined: keep the current one, or generate one
 * @property {string | undefined} questdbPassword
 * @property {string | undefined} grafanaAdminPassword
 * @property {string | undefined} harborId
 * @property {string} timezone
 * @property {string[]} ntpServers             empty: Debian's default pool
 * @property {Network} network
 * @property {boolean} readOnlyRoot
 * @property {number | undefined} queueMaxBytes  undefined: keep the current bound, or derive it from free space
 */

/** The secrets the appliance holds, by config key: credential file name and the gateway's credential id. */
export const SECRETS = /** @type {const} */ ([
  { key: 'API_KEY', field: 'apiKey', file: 'harbor.api_key', credential: 'api_key' },
  { key: 'QUESTDB_PASSWORD', field: 'questdbPassword', file: 'harbor.questdb_password', credential: 'questdb_password' },
  { key: 'GRAFANA_ADMIN_PASSWORD', field: 'grafanaAdminPassword', file: 'harbor.grafana_admin_password', credential: 'grafana_admin_password' },
]);

const KEYS = new Set([
  'SITE_NAME',
  'HOSTNAME',
  'API_KEY',
  'QUESTDB_PASSWORD',
  'GRAFANA_ADMIN_PASSWORD',
  'HARBOR_ID',
  'TIMEZONE',
  'NTP_SERVERS',
  'NETWORK',
  'ADDRESS',
  'GATEWAY',
  'DNS',
  'READ_ONLY_ROOT',
  'QUEUE_MAX_BYTES',
]);

// The gateway refuses these in production (src/config); refusing them here names the config line instead.
const SHIPPED_TEST_CREDENTIALS = new Set(['harbor-dev-key', 'quest', 'admin', 'password', 'changeme', 'change-me']);
export const MIN_SECRET_LENGTH = 16;
const MAX_SECRET_LENGTH = 256;
const MIB = 1024 * 1024;
/** Smallest queue bound the appliance accepts: below it a short QuestDB outage already refuses readings. */
export const MIN_QUEUE_BYTES = 16 * MIB;
/** Share of the free space of /var the queue gets by default: QuestDB, Grafana and logs share the rest. */
export const DEFAULT_QUEUE_SHARE = 0.25;
/** Largest share a technician may give the queue: QuestDB must still be able to take what the queue holds. */
export const MAX_QUEUE_SHARE = 0.5;

/**
 * Splits harbor.conf into KEY -> value. One `KEY=value` a line; `#` starts a comment line; values run
 * to the end of the line (so passwords may hold `#`) and may be wrapped in matching quotes.
 * Tolerates what editors on a technician's laptop add: a byte-order mark, CRLF line ends.
 * @param {string} text
 * @returns {{ values: Map<string, string>, problems: string[] }}
 */
export function parseConfigText(text) {
  /** @type {Map<string, string>} */
  const values = new Map();
  /** @type {string[]} */
  const problems = [];
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  lines.forEach((raw, index) => {
    const line = raw.trim();
    const where = `line ${index + 1}`;
    if (line === '' || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    if (eq < 0) {
      problems.push(`${where}: expected KEY=value`);
      return;
    }
    const key = line.slice(0, eq).trim().toUpperCase();
    let value = line.slice(eq + 1).trim();
    if (!/^[A-Z_][A-Z0-9_]*$/.test(key)) {
      problems.push(`${where}: "${key.slice(0, 40)}" is not a setting name`);
      return;
    }
    if (!KEYS.has(key)) {
      problems.push(`${where}: unknown setting ${key}`);
      return;
    }
    if (values.has(key)) {
      problems.push(`${where}: ${key} is set twice`);
      return;
    }
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0]) {
      value = value.slice(1, -1);
    }
    values.set(key, value);
  });
  return { values, problems };
}

/** Parses "1048576", "512KiB", "1 GiB", "64MB" like the gateway's QUEUE_MAX_BYTES does. */
export function parseByteSize(/** @type {string} */ text) {
  const match = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(text);
  if (!match) return null;
  /** @type {Record<string, number>} */
  const units = { '': 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 1024, mib: MIB, gib: 1024 * MIB };
  const unit = units[String(match[2]).toLowerCase()];
  if (unit === undefined) return null;
  const bytes = Number(match[1]) * unit;
  return Number.isSafeInteger(bytes) ? bytes : null;
}

const yes = new Set(['yes', 'true', 'on', '1']);
const no = new Set(['no', 'false', 'off', '0']);

/**
 * Checks the parsed values and fills in defaults. Problems name the setting, never a secret's value.
 * @param {Map<string, string>} values
 * @param {{ zoneExists: (zone: string) => boolean }} env
 * @returns {{ settings: Settings, problems: string[] }}
 */
export function validateSettings(values, env) {
  /** @type {string[]} */
  const problems = [];
  const get = (/** @type {string} */ key) => {
    const value = values.get(key);
    return value === undefined || value === '' ? undefined : value;
  };

  const siteName = get('SITE_NAME') ?? '';
  if (siteName.length > 64) problems.push('SITE_NAME must be at most 64 characters');
  if (/\p{Cc}/u.test(siteName)) problems.push('SITE_NAME must not contain control characters');

  const hostname = get('HOSTNAME')?.toLowerCase();
  if (hostname !== undefined && !/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(hostname)) {
    problems.push('HOSTNAME must be 1-63 letters, digits or inner hyphens (one DNS label)');
  }

  /** @type {Record<string, string | undefined>} */
  const secrets = {};
  for (const { key, field } of SECRETS) {
    const secret = get(key);
    if (secret === undefined) continue;
    if (SHIPPED_TEST_CREDENTIALS.has(secret.toLowerCase())) {
      problems.push(`${key} is a shipped test default; choose your own or leave it empty to have one generated`);
    } else if (secret.length < MIN_SECRET_LENGTH || secret.length > MAX_SECRET_LENGTH) {
      problems.push(`${key} must be ${MIN_SECRET_LENGTH}-${MAX_SECRET_LENGTH} characters, or empty to have one generated`);
    } else if (!/^[\x21-\x7e]+$/.test(secret)) {
      problems.push(`${key} may hold printable ASCII characters only, no spaces`);
    }
    secrets[field] = secret;
  }

  const harborId = get('HARBOR_ID');
  if (harborId !== undefined && !/^[A-Za-z0-9_.~-]{1,128}$/.test(harborId)) {
    problems.push('HARBOR_ID must be 1-128 characters of A-Z a-z 0-9 _ . ~ -');
  }

  const timezone = get('TIMEZONE') ?? 'UTC';
  if (!/^[A-Za-z0-9_+-]+(?:\/[A-Za-z0-9_+-]+)*$/.test(timezone) || !env.zoneExists(timezone)) {
    problems.push(`TIMEZONE ${JSON.stringify(timezone.slice(0, 60))} is not a known time zone (for example Europe/Berlin or UTC)`);
  }

  const ntpServers = (get('NTP_SERVERS') ?? '').split(/[\s,]+/).filter((server) => server !== '');
  for (const server of ntpServers) {
    if (isIP(server) === 0 && !isHostName(server)) problems.push(`NTP_SERVERS: ${JSON.stringify(server.slice(0, 60))} is not a host name or IP address`);
  }

  /** @type {Network} */
  let network = { mode: 'dhcp' };
  const mode = (get('NETWORK') ?? 'dhcp').toLowerCase();
  const address = get('ADDRESS');
  const gateway = get('GATEWAY');
  const dns = (get('DNS') ?? '').split(/[\s,]+/).filter((server) => server !== '');
  if (mode === 'static') {
    if (address === undefined) problems.push('NETWORK=static needs ADDRESS (for example 192.168.10.20/24)');
    else if (!isCidr(address)) problems.push('ADDRESS must be an address with its prefix length, for example 192.168.10.20/24');
    if (gateway !== undefined && isIP(gateway) === 0) problems.push('GATEWAY must be an IP address');
    for (const server of dns) if (isIP(server) === 0) problems.push(`DNS: ${JSON.stringify(server.slice(0, 60))} is not an IP address`);
    network = { mode: 'static', address: address ?? '', gateway, dns };
  } else if (mode === 'dhcp') {
    for (const [key, value] of [['ADDRESS', address], ['GATEWAY', gateway], ['DNS', dns.length > 0 ? 'set' : undefined]]) {
      if (value !== undefined) problems.push(`${key} applies only with NETWORK=static`);
    }
  } else {
    problems.push('NETWORK must be dhcp or static');
  }

  const readOnlyText = (get('READ_ONLY_ROOT') ?? 'no').toLowerCase();
  if (!yes.has(readOnlyText) && !no.has(readOnlyText)) problems.push('READ_ONLY_ROOT must be yes or no');

  let queueMaxBytes;
  const queueText = get('QUEUE_MAX_BYTES');
  if (queueText !== undefined) {
    const bytes = parseByteSize(queueText);
    if (bytes === null) problems.push('QUEUE_MAX_BYTES must be a size such as 2GiB or 500MB');
    else if (bytes < MIN_QUEUE_BYTES) problems.push(`QUEUE_MAX_BYTES must be at least ${MIN_QUEUE_BYTES / MIB}MiB`);
    else queueMaxBytes = bytes;
  }

  return {
    settings: {
      siteName,
      hostname,
      apiKey: secrets['apiKey'],
      questdbPassword: secrets['questdbPassword'],
      grafanaAdminPassword: secrets['grafanaAdminPassword'],
      harborId,
      timezone,
      ntpServers,
      network,
      readOnlyRoot: yes.has(readOnlyText),
      queueMaxBytes,
    },
    problems,
  };
}

const isHostName = (/** @type {string} */ name) =>
  name.length <= 253 && name.split('.').every((label) => /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(label));

function isCidr(/** @type {string} */ text) {
  const match = /^([^/]+)\/(\d{1,3})$/.exec(text);
  if (!match) return false;
  const family = isIP(String(match[1]));
  const prefix = Number(match[2]);
  return (family === 4 && prefix <= 32) || (family === 6 && prefix <= 128);
}

/**
 * The queue's disk bound. A technician's value must leave QuestDB room; without one the bound is
 * kept from the last configuration, or set to a quarter of the free space of /var at first boot.
 * @param {{ requested: number | undefined, current: number | undefined, freeBytes: number }} input
 * @returns {{ bytes: number } | { problem: string }}
 */
export function queueBound({ requested, current, freeBytes }) {
  const limit = Math.floor(freeBytes * MAX_QUEUE_SHARE);
  if (requested !== undefined) {
    if (requested > limit) {
      return { problem: `QUEUE_MAX_BYTES is more than half of the ${Math.floor(freeBytes / MIB)}MiB free on the card; at most ${Math.floor(limit / MIB)}MiB` };
    }
    return { bytes: requested };
  }
  if (current !== undefined) return { bytes: current };
  const bytes = Math.floor((freeBytes * DEFAULT_QUEUE_SHARE) / MIB) * MIB;
  if (bytes < MIN_QUEUE_BYTES) {
    return { problem: `only ${Math.floor(freeBytes / MIB)}MiB free on the card; the queue needs at least ${(MIN_QUEUE_BYTES / MIB) * 4}MiB free` };
  }
  return { bytes };
}

/** A hostname unique to this card, from its machine id (generated by systemd on first boot). */
export const defaultHostname = (/** @type {string} */ machineId) => `harbor-${machineId.trim().slice(0, 6) || 'gateway'}`;

/** systemd EnvironmentFile value: double-quoted, with the characters systemd expands escaped. */
export const envValue = (/** @type {string} */ value) => `"${value.replace(/[\\"$`]/g, (c) => `\\${c}`)}"`;

/** Reads an environment file as written by renderGatewayEnv, the way systemd's EnvironmentFile= does. */
export function parseEnvText(/** @type {string} */ text) {
  /** @type {Record<string, string>} */
  const env = {};
  for (const line of text.split('\n')) {
    const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (!match) continue;
    const value = String(match[2]);
    env[String(match[1])] = value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value;
  }
  return env;
}

/**
 * The gateway's settings on the appliance (EnvironmentFile of its drop-in). No secrets: those are
 * systemd credentials.
 * @param {{ settings: Settings, hostname: string, queueMaxBytes: number }} input
 */
export function renderGatewayEnv({ settings, hostname, queueMaxBytes }) {
  const lines = [
    '# Written by harbor-firstboot from harbor.conf; change harbor.conf on the boot partition instead.',
    'GATEWAY_ENV=production',
    'DATA_DIR=/var/lib/harbor-gateway',
    `QUEUE_MAX_BYTES=${queueMaxBytes}`,
    `GATEWAY_NAME=${envValue(settings.siteName || hostname)}`,
    'QUESTDB_USERNAME=admin',
  ];
  if (settings.harborId !== undefined) lines.push(`HARBOR_ID=${settings.harborId}`);
  return `${lines.join('\n')}\n`;
}

/** Reads QUEUE_MAX_BYTES back from a gateway env file written by renderGatewayEnv. */
export function queueBytesFromEnv(/** @type {string} */ text) {
  const match = /^QUEUE_MAX_BYTES=(\d+)$/m.exec(text);
  return match ? Number(match[1]) : undefined;
}

/** systemd-networkd config for the wired interface: DHCP, or the static address. */
export function renderNetwork(/** @type {Network} */ network) {
  const lines = ['# Written by harbor-firstboot from harbor.conf.', '[Match]', 'Type=ether', '', '[Network]'];
  if (network.mode === 'dhcp') {
    lines.push('DHCP=yes');
  } else {
    lines.push(`Address=${network.address}`);
    if (network.gateway !== undefined) lines.push(`Gateway=${network.gateway}`);
    for (const server of network.dns) lines.push(`DNS=${server}`);
  }
  // Technicians reach the dashboard as http://<hostname>.local:3000 without knowing the address.
  lines.push('MulticastDNS=yes', '');
  return lines.join('\n');
}

/** systemd-timesyncd drop-in, or undefined to keep Debian's default servers. */
export function renderTimesyncd(/** @type {string[]} */ servers) {
  return servers.length === 0 ? undefined : `# Written by harbor-firstboot from harbor.conf.\n[Time]\nNTP=${servers.join(' ')}\n`;
}

/** /etc/hosts for the chosen hostname. */
export function renderHosts(/** @type {string} */ hostname) {
  return [
    '127.0.0.1\tlocalhost',
    `127.0.1.1\t${hostname}`,
    '::1\t\tlocalhost ip6-localhost ip6-loopback',
    'ff02::1\t\tip6-allnodes',
    'ff02::2\t\tip6-allrouters',
    '',
  ].join('\n');
}

/** Sets or clears `ro` in the options of the root line of an fstab, leaving every other line as it is. */
export function setRootReadOnly(/** @type {string} */ fstab, /** @type {boolean} */ readOnly) {
  return fstab
    .split('\n')
    .map((line) => {
      const fields = line.trim().split(/\s+/);
      if (line.trim().startsWith('#') || fields.length < 4 || fields[1] !== '/') return line;
      const options = String(fields[3]).split(',').filter((option) => option !== 'ro' && option !== 'rw' && option !== 'defaults');
      fields[3] = [readOnly ? 'ro' : 'rw', ...options].join(',');
      return fields.join('\t');
    })
    .join('\n');
}

/**
 * harbor.conf as it now applies, secrets left empty: the technician copies it to harbor.conf and
 * edits it to change something later.
 * @param {{ settings: Settings, hostname: string, queueMaxBytes: number, appliedAt: Date }} input
 */
export function renderApplied({ settings, hostname, queueMaxBytes, appliedAt }) {
  const network = settings.network;
  const quote = (/** @type {string} */ value) => (value === '' ? '' : `"${value}"`);
  return [
    `# Settings applied on ${appliedAt.toISOString()}. To change them, copy this file to harbor.conf,`,
    '# edit it and boot the board with it. Empty passwords and keys keep the current ones.',
    `SITE_NAME=${quote(settings.siteName)}`,
    `HOSTNAME=${hostname}`,
    'API_KEY=',
    'QUESTDB_PASSWORD=',
    'GRAFANA_ADMIN_PASSWORD=',
    `HARBOR_ID=${settings.harborId ?? ''}`,
    `TIMEZONE=${settings.timezone}`,
    `NTP_SERVERS=${settings.ntpServers.join(' ')}`,
    `NETWORK=${network.mode}`,
    `ADDRESS=${network.mode === 'static' ? network.address : ''}`,
    `GATEWAY=${network.mode === 'static' ? (network.gateway ?? '') : ''}`,
    `DNS=${network.mode === 'static' ? network.dns.join(' ') : ''}`,
    `READ_ONLY_ROOT=${settings.readOnlyRoot ? 'yes' : 'no'}`,
    `# The queue may hold ${Math.floor(queueMaxBytes / MIB)}MiB; empty keeps that bound.`,
    'QUEUE_MAX_BYTES=',
    '',
  ].join('\r\n');
}
