// The appliance's boot-partition config file (harbor.conf): parsing, the checks that are the
// appliance's own (the gateway's rules are checked by the gateway itself, see firstboot.mjs), and
// the text of the files it turns into. Pure functions only, so the rules are unit-tested on any
// machine; the effects live in firstboot.mjs. Runs on the board's Node (Debian's nodejs 20).
import { isIP } from 'node:net';

/** @typedef {{ mode: 'dhcp' } | { mode: 'static', address: string, gateway: string | undefined, dns: string[] }} Network */
/**
 * @typedef {object} Settings
 * @property {string} siteName                 free text shown on the console and in health rows ('' = none)
 * @property {string | undefined} hostname     undefined: derived from the machine id
 * @property {string | undefined} apiKey       undefined: keep the current one, or generate one (also when invalid)
 * @property {string | undefined} questdbPassword
 * @property {string | undefined} grafanaAdminPassword
 * @property {string | undefined} consolePassword
 * @property {string | undefined} harborId
 * @property {string} timezone
 * @property {string[]} ntpServers             empty: Debian's default pool
 * @property {Network} network
 * @property {boolean} readOnlyRoot
 * @property {number | undefined} queueMaxBytes  undefined: keep the current bound, or derive it from free space
 * @property {Alerts} alerts
 * @property {Record<string, string>} forwarding      forwarding settings that are set, by key, for gateway.env
 * @property {Record<string, string>} storedSecrets   optional secrets given in harbor.conf (forwarding, /metrics), by credential name
 * @property {DeviceKey[] | undefined} deviceKeys  undefined: keep the key file as it is; []: no device keys
 * @property {Update} update
 */
/**
 * @typedef {object} DeviceKey  a device's own key, as harbor.conf gives it (only its hash is stored)
 * @property {string} name
 * @property {string} key
 * @property {string | undefined} shipPrefix
 */
/**
 * @typedef {object} Update  updates over the air (update.mjs)
 * @property {string} url            '' = none: the address of the central tier's bundle for this site
 * @property {number | undefined} trialSeconds  how long a new release may take to be ready on trial
 */
/**
 * @typedef {object} Alerts  who hears of the dashboard's alerts; '' = nobody that way
 * @property {string} email       addresses separated by ; (Grafana's form)
 * @property {string} webhookUrl
 * @property {string} smtpHost    host:port of the mail server that sends alert e-mail, without login
 * @property {string} smtpFrom
 */

/**
 * The secrets the appliance holds, by config key and by the name of their systemd credential;
 * generated at first boot when harbor.conf leaves them empty. The units load the first three from
 * /etc/harbor-gateway/credentials/; the console password is in systemd's credential store
 * (/etc/credstore), which the gateway's unit loads by name, so that a board installed without the
 * appliance starts without one.
 */
export const SECRETS = /** @type {const} */ ([
  { key: 'API_KEY', field: 'apiKey', credential: 'api_key', store: 'credentials' },
  { key: 'QUESTDB_PASSWORD', field: 'questdbPassword', credential: 'questdb_password', store: 'credentials' },
  { key: 'GRAFANA_ADMIN_PASSWORD', field: 'grafanaAdminPassword', credential: 'grafana_admin_password', store: 'credentials' },
  { key: 'CONSOLE_PASSWORD', field: 'consolePassword', credential: 'console_password', store: 'credstore' },
]);

/**
 * The forwarding sinks' settings (docs/fleet.md) in harbor.conf's order. Those with a credential
 * are secrets: kept in systemd's credential store (/etc/credstore) when given, kept as they are
 * when empty, never generated. The others go into gateway.env as written: the gateway checks them.
 * @type {readonly { key: string, credential?: string }[]}
 */
const FORWARDING = [
  { key: 'LOCAL_QUESTDB' },
  { key: 'UPSTREAM_URL' },
  { key: 'UPSTREAM_API_KEY', credential: 'upstream_api_key' },
  { key: 'UPSTREAM_PROXY' },
  { key: 'UPSTREAM_POLICY' },
  { key: 'UPSTREAM_BACKFILL' },
  { key: 'UPSTREAM_COMPRESSION' },
  { key: 'UPSTREAM_ORDER' },
  { key: 'UPSTREAM_FLUSH_INTERVAL_MS' },
  { key: 'UPSTREAM_MAX_BYTES_PER_S' },
  { key: 'UPSTREAM_CHEAP_HOURS' },
  { key: 'KAFKA_BROKERS' },
  { key: 'KAFKA_TOPIC' },
  { key: 'KAFKA_TLS' },
  { key: 'KAFKA_SASL_MECHANISM' },
  { key: 'KAFKA_SASL_USERNAME' },
  { key: 'KAFKA_SASL_PASSWORD', credential: 'kafka_sasl_password' },
  { key: 'KAFKA_POLICY' },
  { key: 'KAFKA_BACKFILL' },
  { key: 'KAFKA_COMPRESSION' },
  { key: 'KAFKA_ORDER' },
  { key: 'KAFKA_FLUSH_INTERVAL_MS' },
  { key: 'KAFKA_MAX_BYTES_PER_S' },
  { key: 'KAFKA_CHEAP_HOURS' },
  { key: 'REMOTE_QUESTDB_URL' },
  { key: 'REMOTE_QUESTDB_TOKEN', credential: 'remote_questdb_token' },
  { key: 'REMOTE_QUESTDB_TABLE' },
  { key: 'REMOTE_QUESTDB_POLICY' },
  { key: 'REMOTE_QUESTDB_BACKFILL' },
  { key: 'REMOTE_QUESTDB_COMPRESSION' },
  { key: 'REMOTE_QUESTDB_FLUSH_INTERVAL_MS' },
  { key: 'REMOTE_QUESTDB_MAX_BYTES_PER_S' },
  { key: 'REMOTE_QUESTDB_CHEAP_HOURS' },
];
/** The forwarding secrets, by config key and credential name. */
const FORWARD_SECRETS = FORWARDING.flatMap(({ key, credential }) => (credential === undefined ? [] : [{ key, credential }]));
/**
 * Secrets never generated: kept in systemd's credential store when given, kept as they are when
 * empty; the gateway's unit loads each by name and skips one never given. The forwarding sinks'
 * and the token of /metrics for clients other than the board itself.
 */
export const STORED_SECRETS = [...FORWARD_SECRETS, { key: 'METRICS_TOKEN', credential: 'metrics_token' }];
/** The forwarding settings first boot writes into gateway.env. */
export const FORWARD_ENV_KEYS = FORWARDING.filter(({ credential }) => credential === undefined).map(({ key }) => key);

const KEYS = new Set([
  ...FORWARDING.map(({ key }) => key),
  'SITE_NAME',
  'HOSTNAME',
  'API_KEY',
  'QUESTDB_PASSWORD',
  'GRAFANA_ADMIN_PASSWORD',
  'CONSOLE_PASSWORD',
  'METRICS_TOKEN',
  'HARBOR_ID',
  'TIMEZONE',
  'NTP_SERVERS',
  'NETWORK',
  'ADDRESS',
  'GATEWAY',
  'DNS',
  'READ_ONLY_ROOT',
  'QUEUE_MAX_BYTES',
  'ALERT_EMAIL',
  'ALERT_WEBHOOK_URL',
  'ALERT_SMTP_HOST',
  'ALERT_SMTP_FROM',
  'DEVICE_KEYS',
  'UPDATE_URL',
  'UPDATE_TRIAL_SECONDS',
]);

/** The gateway's rules for the key file (src/keys/key-file.ts), which the key file written here must pass. */
const KEY_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const SHIP_PREFIX = /^[^\s\p{Cc}]{1,100}$/u;
/** A device key typed into harbor.conf: as long as the gateway asks of API_KEY, one field of a line. */
const DEVICE_KEY = /^[\x21-\x39\x3b-\x7e]{16,256}$/;

/**
 * DEVICE_KEYS: `name:key` or `name:key:ship_prefix` entries separated by spaces, commas or `;`;
 * `none` removes every device key. The key may not hold `:` here.
 * @param {string} text
 * @param {string} [setting]  the setting named in problems
 * @returns {{ keys: DeviceKey[], problems: string[] }}
 */
export function parseDeviceKeys(text, setting = 'DEVICE_KEYS') {
  /** @type {DeviceKey[]} */
  const keys = [];
  /** @type {string[]} */
  const problems = [];
  if (text.trim().toLowerCase() === 'none') return { keys, problems };
  const names = new Set();
  for (const [index, entry] of text
    .split(/[\s,;]+/)
    .filter((e) => e !== '')
    .entries()) {
    const at = entry.indexOf(':');
    const name = at < 0 ? entry : entry.slice(0, at);
    const rest = at < 0 ? '' : entry.slice(at + 1);
    const split = rest.indexOf(':');
    const key = split < 0 ? rest : rest.slice(0, split);
    const shipPrefix = split < 0 ? undefined : rest.slice(split + 1);
    // Never the key itself in a problem: it would end on the boot partition's error file.
    const where = `${setting} entry ${index + 1}${KEY_NAME.test(name) ? ` (${name})` : ''}`;
    if (!KEY_NAME.test(name)) problems.push(`${where}: the name must be 1-64 characters of A-Z a-z 0-9 _ . -`);
    else if (name === 'default') problems.push(`${where}: the name default is API_KEY's`);
    else if (names.has(name)) problems.push(`${where}: the name is used twice`);
    else if (!DEVICE_KEY.test(key)) problems.push(`${where}: the key must be 16-256 printable characters without spaces or :`);
    else if (shipPrefix !== undefined && !SHIP_PREFIX.test(shipPrefix))
      problems.push(`${where}: the ship prefix must be 1-100 characters without spaces`);
    else {
      names.add(name);
      keys.push({ name, key, shipPrefix });
    }
  }
  if (keys.length === 0 && problems.length === 0 && setting === 'DEVICE_KEYS')
    problems.push('DEVICE_KEYS holds no entry: write none to remove every device key');
  return { keys, problems };
}

/**
 * harbor-keys.conf, the drop-in that changes some device keys and leaves the others as they are:
 * ADD= entries as DEVICE_KEYS takes them (a name that exists gets the new key), REVOKE= names.
 * @param {string} text
 * @returns {{ add: DeviceKey[], revoke: string[], problems: string[] }}
 */
export function parseKeyChanges(text) {
  const { values, problems } = parseConfigText(text, new Set(['ADD', 'REVOKE']));
  const added = parseDeviceKeys(values.get('ADD') ?? '', 'ADD');
  problems.push(...added.problems);
  const revoke = (values.get('REVOKE') ?? '').split(/[\s,;]+/).filter((name) => name !== '');
  for (const name of revoke) if (!KEY_NAME.test(name)) problems.push(`REVOKE: ${JSON.stringify(name.slice(0, 64))} is not a key name`);
  for (const { name } of added.keys) if (revoke.includes(name)) problems.push(`${name} is both added and revoked`);
  if (added.keys.length === 0 && revoke.length === 0 && problems.length === 0) problems.push('harbor-keys.conf adds and revokes nothing');
  return { add: added.keys, revoke, problems };
}

/**
 * The gateway's key file with some keys added (or given a new key) and some revoked, every other
 * line kept as it was (the gateway's own fields among them).
 * @param {string} text   the key file as it is ('' when there is none)
 * @param {{ add: DeviceKey[], revoke: string[] }} changes
 * @param {(key: string) => string} hash
 */
export function changeKeyFile(text, { add, revoke }, hash) {
  const nameOf = (/** @type {string} */ line) =>
    line.trim() === '' || line.trim().startsWith('#') ? undefined : line.trim().split(/\s+/)[0];
  const lines = text === '' ? [renderKeyFile([], hash).trimEnd()] : text.replace(/\n$/, '').split('\n');
  const present = new Set(lines.map(nameOf).filter((name) => name !== undefined));
  const drop = new Set([...revoke, ...add.map(({ name }) => name)]);
  const kept = lines.filter((line) => !drop.has(String(nameOf(line))));
  const added = renderKeyFile(add, hash).split('\n').slice(1, -1);
  return {
    text: `${[...kept, ...added].join('\n')}\n`,
    added: add.filter(({ name }) => !present.has(name)).map(({ name }) => name),
    replaced: add.filter(({ name }) => present.has(name)).map(({ name }) => name),
    revoked: revoke.filter((name) => present.has(name)),
    unknown: revoke.filter((name) => !present.has(name)),
  };
}

/**
 * The gateway's device key file (src/keys/key-file.ts reads it): a header, then one line per key
 * with its name, the key's salted HMAC-SHA256 as `harbor-gateway keys add` writes it, and the prefix.
 * @param {DeviceKey[]} keys
 * @param {(key: string) => string} hash
 */
export function renderKeyFile(keys, hash) {
  return [
    '# Harbor Gateway device keys: name, key hash, optional ship_id prefix. Written by harbor-firstboot from DEVICE_KEYS in harbor.conf.',
    ...keys.map(({ name, key, shipPrefix }) => `${name} ${hash(key)}${shipPrefix === undefined ? '' : ` ${shipPrefix}`}`),
    '',
  ].join('\n');
}

/** update.env: what harbor-update-url.service and harbor-update confirm read. */
export function renderUpdateEnv(/** @type {Update} */ update) {
  const lines = ['# Written by harbor-firstboot from harbor.conf (UPDATE_*): updates over the air.'];
  if (update.url !== '') lines.push(`UPDATE_URL=${envValue(update.url)}`);
  if (update.trialSeconds !== undefined) lines.push(`UPDATE_TRIAL_SECONDS=${update.trialSeconds}`);
  return `${lines.join('\n')}\n`;
}

// Length and the shipped test values are the gateway's production rules, checked by the gateway.
// These are the appliance's: a secret is typed into sensors and login forms and sits on one line of
// harbor.conf, whose values are trimmed.
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
 * @param {Set<string>} [known]  the setting names the file may hold
 * @returns {{ values: Map<string, string>, problems: string[] }}
 */
export function parseConfigText(text, known = KEYS) {
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
    if (!known.has(key)) {
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
    if (secret.length > MAX_SECRET_LENGTH) {
      problems.push(`${key} must be at most ${MAX_SECRET_LENGTH} characters, or empty to have one generated`);
    } else if (!/^[\x21-\x7e]+$/.test(secret)) {
      problems.push(`${key} may hold printable ASCII characters only, no spaces`);
    } else {
      secrets[field] = secret;
    }
  }

  /** @type {Record<string, string>} */
  const storedSecrets = {};
  for (const { key, credential } of STORED_SECRETS) {
    const secret = get(key);
    if (secret === undefined) continue;
    if (secret.length > MAX_SECRET_LENGTH)
      problems.push(`${key} must be at most ${MAX_SECRET_LENGTH} characters, or empty to keep the current one`);
    else if (!/^[\x21-\x7e]+$/.test(secret)) problems.push(`${key} may hold printable ASCII characters only, no spaces`);
    else storedSecrets[credential] = secret;
  }
  /** @type {Record<string, string>} */
  const forwarding = {};
  for (const key of FORWARD_ENV_KEYS) {
    const value = get(key);
    if (value === undefined) continue;
    if (/\p{Cc}/u.test(value)) problems.push(`${key} must not contain control characters`);
    else forwarding[key] = value;
  }

  // Its rule is the gateway's (HARBOR_ID), checked there.
  const harborId = get('HARBOR_ID');

  const timezone = get('TIMEZONE') ?? 'UTC';
  if (!/^[A-Za-z0-9_+-]+(?:\/[A-Za-z0-9_+-]+)*$/.test(timezone) || !env.zoneExists(timezone)) {
    problems.push(`TIMEZONE ${JSON.stringify(timezone.slice(0, 60))} is not a known time zone (for example Europe/Berlin or UTC)`);
  }

  const ntpServers = (get('NTP_SERVERS') ?? '').split(/[\s,]+/).filter((server) => server !== '');
  for (const server of ntpServers) {
    if (isIP(server) === 0 && !isHostName(server))
      problems.push(`NTP_SERVERS: ${JSON.stringify(server.slice(0, 60))} is not a host name or IP address`);
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
    for (const [key, value] of [
      ['ADDRESS', address],
      ['GATEWAY', gateway],
      ['DNS', dns.length > 0 ? 'set' : undefined],
    ]) {
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

  const alerts = {
    email: (get('ALERT_EMAIL') ?? '')
      .split(/[\s;,]+/)
      .filter((address) => address !== '')
      .join(';'),
    webhookUrl: get('ALERT_WEBHOOK_URL') ?? '',
    smtpHost: get('ALERT_SMTP_HOST') ?? '',
    smtpFrom: get('ALERT_SMTP_FROM') ?? '',
  };
  const isAddress = (/** @type {string} */ text) => /^[^\s@;,"'\\]+@[^\s@;,"'\\]+$/.test(text);
  if (alerts.email !== '' && !alerts.email.split(';').every(isAddress))
    problems.push('ALERT_EMAIL must be e-mail addresses (name@example.com) separated by spaces or ;');
  if (alerts.webhookUrl !== '' && !/^https?:\/\/[^\s"'\\]+$/.test(alerts.webhookUrl))
    problems.push('ALERT_WEBHOOK_URL must be an http:// or https:// address without spaces or quotes');
  const [smtpName, smtpPort, ...rest] = alerts.smtpHost.split(':');
  if (
    alerts.smtpHost !== '' &&
    (rest.length > 0 ||
      (!isHostName(String(smtpName)) && isIP(String(smtpName)) === 0) ||
      (smtpPort !== undefined && !/^\d{1,5}$/.test(smtpPort)))
  ) {
    problems.push('ALERT_SMTP_HOST must be a mail server as host or host:port, for example mail.site.lan:25');
  }
  if (alerts.email !== '' && alerts.smtpHost === '') problems.push('ALERT_EMAIL needs ALERT_SMTP_HOST, the mail server that sends it');
  if (alerts.smtpFrom !== '' && !isAddress(alerts.smtpFrom)) problems.push('ALERT_SMTP_FROM must be one e-mail address');

  /** @type {DeviceKey[] | undefined} */
  let deviceKeys;
  const deviceKeysText = get('DEVICE_KEYS');
  if (deviceKeysText !== undefined) {
    const parsed = parseDeviceKeys(deviceKeysText);
    problems.push(...parsed.problems);
    deviceKeys = parsed.keys;
  }
  const updateUrl = get('UPDATE_URL') ?? '';
  if (updateUrl !== '' && !/^https?:\/\/[^\s"'\\]+$/.test(updateUrl))
    problems.push('UPDATE_URL must be an http:// or https:// address without spaces or quotes');
  const trialText = get('UPDATE_TRIAL_SECONDS');
  const trialSeconds = trialText === undefined ? undefined : Number(trialText);
  if (trialSeconds !== undefined && !(Number.isInteger(trialSeconds) && trialSeconds >= 60 && trialSeconds <= 7200))
    problems.push('UPDATE_TRIAL_SECONDS must be a whole number of seconds from 60 to 7200');

  return {
    settings: {
      alerts,
      siteName,
      deviceKeys,
      update: { url: updateUrl, trialSeconds },
      hostname,
      apiKey: secrets['apiKey'],
      questdbPassword: secrets['questdbPassword'],
      grafanaAdminPassword: secrets['grafanaAdminPassword'],
      consolePassword: secrets['consolePassword'],
      harborId,
      timezone,
      ntpServers,
      network,
      readOnlyRoot: yes.has(readOnlyText),
      queueMaxBytes,
      forwarding,
      storedSecrets,
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
 * fstab's root line naming the slot's own partition (root= of the kernel command line, which the
 * boot script sets), checked at boot (pass 1) as a named device can be. The image ships /dev/root,
 * which fits either slot but cannot be checked.
 * @param {string} fstab
 * @param {string} device  e.g. PARTUUID=1a2b3c4d-02
 */
export function setRootDevice(fstab, device) {
  return fstab
    .split('\n')
    .map((line) => {
      const fields = line.trim().split(/\s+/);
      if (line.trim().startsWith('#') || fields.length < 4 || fields[1] !== '/') return line;
      return [device, '/', fields[2], fields[3], fields[4] ?? '0', '1'].join('\t');
    })
    .join('\n');
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
      return {
        problem: `QUEUE_MAX_BYTES is more than half of the ${Math.floor(freeBytes / MIB)}MiB free on the card; at most ${Math.floor(limit / MIB)}MiB`,
      };
    }
    return { bytes: requested };
  }
  if (current !== undefined) return { bytes: current };
  const bytes = Math.floor((freeBytes * DEFAULT_QUEUE_SHARE) / MIB) * MIB;
  if (bytes < MIN_QUEUE_BYTES) {
    return {
      problem: `only ${Math.floor(freeBytes / MIB)}MiB free on the card; the queue needs at least ${(MIN_QUEUE_BYTES / MIB) * 4}MiB free`,
    };
  }
  return { bytes };
}

/** A hostname unique to this card, from its machine id (generated by systemd on first boot). */
export const defaultHostname = (/** @type {string} */ machineId) => `harbor-${machineId.trim().slice(0, 6) || 'gateway'}`;

/** systemd EnvironmentFile value: double-quoted, with the characters systemd expands escaped. */
export const envValue = (/** @type {string} */ value) => `"${value.replace(/[\\"$`]/g, (c) => `\\${c}`)}"`;

/**
 * Reads an environment file the way systemd's EnvironmentFile= does for the lines the appliance
 * writes and the template holds: KEY=value, the value optionally in double quotes with backslash
 * escapes, or in single quotes; comment lines are skipped.
 */
export function parseEnvText(/** @type {string} */ text) {
  /** @type {Record<string, string>} */
  const env = {};
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
    if (!match) continue;
    const value = String(match[2]);
    const quoted = value.length >= 2 && value[0] === value.at(-1) && (value[0] === '"' || value[0] === "'");
    env[String(match[1])] = !quoted ? value : value[0] === '"' ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value.slice(1, -1);
  }
  return env;
}

/** The settings first boot owns in gateway.env; every other line stays as the template or a person wrote it. */
export const FIRSTBOOT_ENV_KEYS = /** @type {const} */ (['GATEWAY_NAME', 'HARBOR_ID', 'QUEUE_MAX_BYTES']);
const FIRSTBOOT_ENV_NOTE = `# On the appliance, harbor-firstboot sets ${FIRSTBOOT_ENV_KEYS.join(', ')} and the forwarding settings from harbor.conf.`;
/** The note of earlier releases, replaced by the one above. */
const EARLIER_ENV_NOTE = `# On the appliance, harbor-firstboot sets ${FIRSTBOOT_ENV_KEYS.join(', ')} from harbor.conf.`;

/**
 * /etc/harbor-gateway/gateway.env on the appliance: the file as it is (at first boot the annotated
 * systemd/gateway.env the image installs) with the settings harbor.conf decides set, each below its
 * commented default. The unit's own defaults (production, the queue's directory, QuestDB's user)
 * need no line. No secrets: those are systemd credentials.
 * @param {{ current: string, settings: Settings, hostname: string, queueMaxBytes: number | undefined }} input
 */
export function renderGatewayEnv({ current, settings, hostname, queueMaxBytes }) {
  /** @type {Record<string, string | undefined>} */
  const values = {
    GATEWAY_NAME: envValue(settings.siteName || hostname),
    HARBOR_ID: settings.harborId === undefined ? undefined : envValue(settings.harborId),
    QUEUE_MAX_BYTES: queueMaxBytes === undefined ? undefined : String(queueMaxBytes),
  };
  for (const key of FORWARD_ENV_KEYS) {
    const value = settings.forwarding[key];
    values[key] = value === undefined ? undefined : envValue(value);
  }
  const lines = (current === '' ? [] : current.replace(/\n$/, '').split('\n')).filter((line) => line !== EARLIER_ENV_NOTE);
  for (const key of [...FIRSTBOOT_ENV_KEYS, ...FORWARD_ENV_KEYS]) {
    const isSet = (/** @type {string} */ line) => line.trim().startsWith(`${key}=`);
    for (let i = lines.findIndex(isSet); i >= 0; i = lines.findIndex(isSet)) lines.splice(i, 1);
    const value = values[key];
    if (value === undefined) continue;
    const documented = lines.findIndex((line) => new RegExp(`^#\\s*${key}=`).test(line));
    lines.splice(documented >= 0 ? documented + 1 : lines.length, 0, `${key}=${value}`);
  }
  if (!lines.includes(FIRSTBOOT_ENV_NOTE)) lines.unshift(FIRSTBOOT_ENV_NOTE);
  return `${lines.join('\n')}\n`;
}

/**
 * /etc/harbor-gateway/grafana.env: the alert contact settings harbor-grafana.service passes to
 * start-grafana.sh and to Grafana's mailer. Rewritten whole at every applied harbor.conf.
 * @param {Alerts} alerts
 */
export function renderGrafanaEnv(alerts) {
  const lines = ["# Written by harbor-firstboot from harbor.conf (ALERT_*): who hears of the dashboard's alerts."];
  if (alerts.email !== '') lines.push(`ALERT_EMAIL=${envValue(alerts.email)}`);
  if (alerts.webhookUrl !== '') lines.push(`ALERT_WEBHOOK_URL=${envValue(alerts.webhookUrl)}`);
  if (alerts.smtpHost !== '') lines.push('GF_SMTP_ENABLED=true', `GF_SMTP_HOST=${envValue(alerts.smtpHost)}`);
  if (alerts.smtpFrom !== '') lines.push(`GF_SMTP_FROM_ADDRESS=${envValue(alerts.smtpFrom)}`);
  return `${lines.join('\n')}\n`;
}

/** QUEUE_MAX_BYTES of a gateway env file, in bytes; undefined when it is not set there. */
export function queueBytesFromEnv(/** @type {string} */ text) {
  const value = parseEnvText(text)['QUEUE_MAX_BYTES'];
  return value === undefined ? undefined : (parseByteSize(value) ?? undefined);
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
      const options = String(fields[3])
        .split(',')
        .filter((option) => option !== 'ro' && option !== 'rw' && option !== 'defaults');
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
    'CONSOLE_PASSWORD=',
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
    `ALERT_EMAIL=${settings.alerts.email}`,
    `ALERT_WEBHOOK_URL=${settings.alerts.webhookUrl}`,
    `ALERT_SMTP_HOST=${settings.alerts.smtpHost}`,
    `ALERT_SMTP_FROM=${settings.alerts.smtpFrom}`,
    '# Forwarding to the centre. Empty keys, passwords and tokens keep the current ones.',
    ...FORWARDING.map(({ key, credential }) => `${key}=${credential === undefined ? (settings.forwarding[key] ?? '') : ''}`),
    '# Empty keeps the token of /metrics for other machines, as it is.',
    'METRICS_TOKEN=',
    '# Device keys are kept as hashes only: empty keeps them, none removes them.',
    'DEVICE_KEYS=',
    `UPDATE_URL=${settings.update.url}`,
    `UPDATE_TRIAL_SECONDS=${settings.update.trialSeconds ?? ''}`,
    '',
  ].join('\r\n');
}
