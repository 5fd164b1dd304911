import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { API_KEY_PATTERN, SETTINGS, type SettingValues } from './settings.js';
import type { DailyWindow } from './daily-windows.js';
import { resolveDataDir } from './data-dir.js';
import { mqttMappingOf, withoutMqttSettings, type MqttBrokerConfig, type MqttSubscribeConfig } from './mqtt-config.js';
import { forwardingSiteRefusal, siteNameOf, type SiteIdSource } from './site-name.js';

/** The ingestion key used in development when none is configured. Production refuses it. */
export const DEVELOPMENT_API_KEY = 'harbor-dev-key';
/** Where development listens while it has no key of its own. */
const LOOPBACK_HOST = '127.0.0.1';
/** Credentials that ship in examples and QuestDB's own defaults; production refuses them. */
const TEST_CREDENTIALS = new Set([DEVELOPMENT_API_KEY, 'quest', 'admin', 'password', 'changeme', 'change-me']);
const MIN_PRODUCTION_SECRET_LENGTH = 16;

type SecretSource = 'environment' | 'file' | 'systemd credential';
type Resolved =
  | 'apiKey'
  | 'apiKeyFile'
  | 'questdbPassword'
  | 'questdbPasswordFile'
  | 'grafanaAdminPassword'
  | 'grafanaAdminPasswordFile'
  | ConsoleSetting
  | 'gatewayName'
  | 'siteId'
  | 'localQuestdb'
  | RemoteQuestDbSetting
  | UpstreamSetting
  | KafkaSetting
  | MqttSetting;

type RemoteQuestDbSetting =
  | 'remoteQuestdbUrl'
  | 'remoteQuestdbTokenFile'
  | 'remoteQuestdbCaFile'
  | 'remoteQuestdbTable'
  | 'remoteQuestdbPolicy'
  | 'remoteQuestdbBackfill'
  | 'remoteQuestdbBatchReadings'
  | 'remoteQuestdbFlushIntervalMs'
  | 'remoteQuestdbCompression'
  | 'remoteQuestdbMaxBytesPerS'
  | 'remoteQuestdbCheapHours';

/** The remote QuestDB sink: ILP/HTTP(S) with a bearer token, and the settings every remote sink has. */
export interface RemoteQuestDbConfig {
  policy: SettingValues['remoteQuestdbPolicy'];
  backfill: boolean;
  batchReadings: number;
  /** REMOTE_QUESTDB_FLUSH_INTERVAL_MS, else FLUSH_INTERVAL_MS. */
  flushIntervalMs: number;
  url: string;
  token: string | undefined;
  /** PEM of REMOTE_QUESTDB_CA_FILE, read and checked at start. */
  ca: string | undefined;
  table: string;
  /** `gzip`: ILP bodies compressed where the remote QuestDB reads them (9.1 and later). */
  compression: SettingValues['remoteQuestdbCompression'];
  /** Bytes a second on average; 0: no budget. */
  maxBytesPerS: number;
  /** Times of day without the budget. */
  cheapHours: DailyWindow[];
}

/** The console password and the `/metrics` token, each resolved from its value, file or credential. */
type ConsoleSetting = 'consolePassword' | 'consolePasswordFile' | 'metricsToken' | 'metricsTokenFile';

/** The UPSTREAM_* settings, gathered into `Config.upstream`. */
type UpstreamSetting = Extract<keyof SettingValues, `upstream${string}`>;

/** The MQTT settings, gathered into `Config.mqtt` and `Config.mqttSubscribe`. */
type MqttSetting = Extract<keyof SettingValues, `mqtt${string}`>;

/** The Kafka sink's settings, gathered into `Config.kafka`. */
type KafkaSetting = Extract<keyof SettingValues, `kafka${string}`>;

export interface Config extends Omit<SettingValues, Resolved> {
  apiKey: string;
  /** Where the key came from, for the startup log (never the key itself). */
  apiKeySource: SecretSource | 'development default';
  questdbPassword: string | undefined;
  /** The local console's password; undefined leaves the console closed. */
  consolePassword: string | undefined;
  /** The bearer token `/metrics` wants from clients other than loopback; undefined: loopback only. */
  metricsToken: string | undefined;
  gatewayName: string;
  /** `SITE_ID`, else the gateway's name: the site of the readings it takes from its own devices. */
  siteId: string;
  /** Where `siteId` came from: set, or fallen back to (said at start when the gateway forwards). */
  siteIdSource: SiteIdSource;
  /** Whether a remote sink forwards readings (upstream, Kafka, a remote QuestDB). */
  forwards: boolean;
  /** `LOCAL_QUESTDB=off` turns the local QuestDB sink off. */
  localQuestdb: boolean;
  /** Undefined unless REMOTE_QUESTDB_URL is set. */
  remoteQuestdb?: RemoteQuestDbConfig;
  /** The upstream sink, when `UPSTREAM_URL` is set. */
  upstream: UpstreamSinkConfig | undefined;
  /** The Kafka sink, when `KAFKA_BROKERS` is set. */
  kafka: KafkaSinkConfig | undefined;
  /** The MQTT endpoint for devices, when `MQTT=on`. */
  mqtt: MqttBrokerConfig | undefined;
  /** The subscription to a site broker, when `MQTT_SUBSCRIBE_URL` is set. */
  mqttSubscribe: MqttSubscribeConfig | undefined;
  /** The reading times accepted, relative to the gateway's clock (a TimeWindow's settings). */
  readingTimes: { maxAheadS: number; maxAgeS: number | undefined; ageReason?: string };
}

/** The upstream sink's settings (`UPSTREAM_*`), resolved; present only when `UPSTREAM_URL` is set. */
export interface UpstreamSinkConfig {
  /** The destination's batch endpoint, whole. */
  url: string;
  apiKey: string;
  /** Where the key came from, for the startup log (never the key itself). */
  apiKeySource: SecretSource;
  caFile: string | undefined;
  proxy: string | undefined;
  timeoutMs: number;
  maxBodyBytes: number;
  policy: SettingValues['upstreamPolicy'];
  backfill: boolean;
  batchReadings: number;
  /** UPSTREAM_FLUSH_INTERVAL_MS, else FLUSH_INTERVAL_MS. */
  flushIntervalMs: number;
  compression: SettingValues['upstreamCompression'];
  order: SettingValues['upstreamOrder'];
  /** Bytes a second on average; 0: no budget. */
  maxBytesPerS: number;
  /** Times of day without the budget. */
  cheapHours: DailyWindow[];
}

/** The Kafka sink's settings, resolved (the SASL password read from its file or credential). */
export interface KafkaSinkConfig {
  /** host:port of one or more brokers to bootstrap from. */
  brokers: string[];
  topic: string;
  clientId: string;
  /** TLS to the brokers, with the system CAs or those of `tlsCaFile`. */
  tls: boolean;
  tlsCaFile: string | undefined;
  sasl: { mechanism: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512'; username: string; password: string } | undefined;
  /** How long one send may take, the producer's retries while a broker is away included, before the batch counts as failed. */
  timeoutMs: number;
  policy: 'block' | 'drop_oldest';
  backfill: boolean;
  batchReadings: number;
  /** KAFKA_FLUSH_INTERVAL_MS, else FLUSH_INTERVAL_MS. */
  flushIntervalMs: number;
  /** Each record batch's codec (Kafka's own, which consumers undo): `off` for none. */
  compression: SettingValues['kafkaCompression'];
  order: SettingValues['kafkaOrder'];
  /** Bytes a second on average; 0: no budget. */
  maxBytesPerS: number;
  /** Times of day without the budget. */
  cheapHours: DailyWindow[];
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;
type ReadSecret = (path: string) => string;

const readSecretFile: ReadSecret = (path) => readFileSync(path, 'utf8');

/** Reads, validates and resolves the whole configuration; throws ConfigError naming every bad variable. */
export function loadConfig(env: Env = process.env, readSecret: ReadSecret = readSecretFile): Config {
  const problems: string[] = [];
  const values: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(SETTINGS)) {
    const raw = env[setting.env] === '' ? undefined : (env[setting.env] ?? setting.default);
    if (raw === undefined) continue;
    const parsed = setting.schema.safeParse(raw);
    if (parsed.success) {
      values[key] = parsed.data;
    } else {
      const shown = 'secret' in setting && setting.secret ? '' : ` (got "${raw}")`;
      problems.push(`${setting.env} ${parsed.error.issues[0]?.message ?? 'is invalid'}${shown}`);
    }
  }
  const partial = values as Partial<SettingValues>;

  const apiKey = resolveSecret(env, problems, readSecret, {
    value: partial.apiKey,
    valueVar: 'API_KEY',
    file: partial.apiKeyFile,
    fileVar: 'API_KEY_FILE',
    credential: 'api_key',
    pattern: API_KEY_PATTERN,
  });
  const questdbPassword = resolveSecret(env, problems, readSecret, {
    value: partial.questdbPassword,
    valueVar: 'QUESTDB_PASSWORD',
    file: partial.questdbPasswordFile,
    fileVar: 'QUESTDB_PASSWORD_FILE',
    credential: 'questdb_password',
  });
  const grafanaPassword = resolveSecret(env, problems, readSecret, {
    value: partial.grafanaAdminPassword,
    valueVar: 'GRAFANA_ADMIN_PASSWORD',
    file: partial.grafanaAdminPasswordFile,
    fileVar: 'GRAFANA_ADMIN_PASSWORD_FILE',
    credential: 'grafana_admin_password',
  });
  const consolePassword = resolveSecret(env, problems, readSecret, {
    value: partial.consolePassword,
    valueVar: 'CONSOLE_PASSWORD',
    file: partial.consolePasswordFile,
    fileVar: 'CONSOLE_PASSWORD_FILE',
    credential: 'console_password',
  });
  const metricsToken = resolveSecret(env, problems, readSecret, {
    value: partial.metricsToken,
    valueVar: 'METRICS_TOKEN',
    file: partial.metricsTokenFile,
    fileVar: 'METRICS_TOKEN_FILE',
    credential: 'metrics_token',
    pattern: API_KEY_PATTERN,
  });
  const upstream = resolveUpstream(env, problems, readSecret, partial);
  if ((partial.questdbUsername === undefined) !== (questdbPassword?.secret === undefined)) {
    problems.push('QUESTDB_USERNAME and QUESTDB_PASSWORD must be set together');
  }

  const remoteQuestdb = remoteQuestDbConfig(env, problems, readSecret, partial);
  const kafkaPassword = resolveSecret(env, problems, readSecret, {
    value: partial.kafkaSaslPassword,
    valueVar: 'KAFKA_SASL_PASSWORD',
    file: partial.kafkaSaslPasswordFile,
    fileVar: 'KAFKA_SASL_PASSWORD_FILE',
    credential: 'kafka_sasl_password',
  });
  const kafkaSasl = [partial.kafkaSaslMechanism, partial.kafkaSaslUsername, kafkaPassword?.secret];
  if (kafkaSasl.some((v) => v === undefined) && kafkaSasl.some((v) => v !== undefined)) {
    problems.push('KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD must be set together');
  }

  const mqttPassword = resolveSecret(env, problems, readSecret, {
    value: partial.mqttSubscribePassword,
    valueVar: 'MQTT_SUBSCRIBE_PASSWORD',
    file: partial.mqttSubscribePasswordFile,
    fileVar: 'MQTT_SUBSCRIBE_PASSWORD_FILE',
    credential: 'mqtt_subscribe_password',
  });
  const mqttMapping = partial.mqttSubscribeUrl === undefined ? undefined : mqttMappingOf(partial, problems);

  if ((partial.tlsCertFile === undefined) !== (partial.tlsKeyFile === undefined)) {
    problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  }

  const production = partial.environment === 'production';
  if (production) {
    if (apiKey === undefined) problems.push('API_KEY is required in production (or API_KEY_FILE, or the api_key credential)');
    checkProductionSecret(problems, 'API_KEY', apiKey?.secret);
    checkProductionSecret(problems, 'QUESTDB_PASSWORD', questdbPassword?.secret);
    checkProductionSecret(problems, 'GRAFANA_ADMIN_PASSWORD', grafanaPassword?.secret);
    checkProductionSecret(problems, 'CONSOLE_PASSWORD', consolePassword?.secret);
    checkProductionSecret(problems, 'METRICS_TOKEN', metricsToken?.secret);
    if (remoteQuestdb !== undefined) checkProductionRemote(problems, remoteQuestdb);
    if (partial.upstreamApiKey !== undefined) {
      problems.push('UPSTREAM_API_KEY is refused in production: use UPSTREAM_API_KEY_FILE or the upstream_api_key credential');
    }
    checkProductionSecret(problems, 'UPSTREAM_API_KEY', upstream?.apiKey);
    checkProductionSecret(problems, 'KAFKA_SASL_PASSWORD', kafkaPassword?.secret);
    if (partial.kafkaSaslMechanism === 'PLAIN' && partial.kafkaTls === false && partial.kafkaTlsCaFile === undefined) {
      problems.push('KAFKA_SASL_MECHANISM PLAIN sends the password in clear: set KAFKA_TLS in production');
    }
    if (partial.mqttSubscribePassword !== undefined) {
      problems.push(
        'MQTT_SUBSCRIBE_PASSWORD is refused in production: use MQTT_SUBSCRIBE_PASSWORD_FILE or the mqtt_subscribe_password credential',
      );
    }
    if (partial.mqttAnonymous === true) problems.push('MQTT_ANONYMOUS lets any client on the network publish: refused in production');
  }
  // Development without a key of its own serves the public development key: on loopback only,
  // unless HOST says otherwise, and then the start is refused below.
  if (!production && apiKey === undefined && env['API_KEY'] !== '' && (env['HOST'] ?? '') === '') values['host'] = LOOPBACK_HOST;
  if (!production) checkExposure(problems, env, partial, apiKey?.secret, grafanaPassword?.secret);
  // A device's key must never open the console, so the one key every device may hold cannot be its password.
  if (consolePassword !== undefined && consolePassword.secret === (apiKey?.secret ?? DEVELOPMENT_API_KEY)) {
    problems.push('CONSOLE_PASSWORD must differ from API_KEY: device keys never open the console');
  }
  for (const [sink, hours, budget] of [
    ['UPSTREAM', partial.upstreamCheapHours, partial.upstreamMaxBytesPerS],
    ['KAFKA', partial.kafkaCheapHours, partial.kafkaMaxBytesPerS],
    ['REMOTE_QUESTDB', partial.remoteQuestdbCheapHours, partial.remoteQuestdbMaxBytesPerS],
  ] as const) {
    if ((hours?.length ?? 0) > 0 && (budget ?? 0) === 0)
      problems.push(`${sink}_CHEAP_HOURS applies only to a bandwidth budget: set ${sink}_MAX_BYTES_PER_S too, or leave the hours out`);
  }
  const forwards = remoteQuestdb !== undefined || partial.upstreamUrl !== undefined || partial.kafkaBrokers !== undefined;
  if (partial.localQuestdb === false && !forwards) {
    problems.push('LOCAL_QUESTDB=off leaves the gateway without a sink: configure one to forward to');
  }
  if (
    partial.maxUnprovenConnections !== undefined &&
    partial.maxConnections !== undefined &&
    partial.maxUnprovenConnections >= partial.maxConnections
  ) {
    problems.push(
      `MAX_UNPROVEN_CONNECTIONS (${partial.maxUnprovenConnections}) must be less than MAX_CONNECTIONS (${partial.maxConnections}): the rest is kept for devices`,
    );
  }
  const site = siteNameOf(partial.siteId, partial.gatewayName, hostname());
  const siteRefusal = forwards ? forwardingSiteRefusal(site) : undefined;
  if (siteRefusal !== undefined) problems.push(siteRefusal);
  const readingTimes = readingTimesOf(partial);
  const localKeepS = localKeepSeconds(partial);
  if (localKeepS !== undefined && localKeepS <= 0) {
    problems.push(
      `MAX_TIME_AHEAD_S (${partial.maxTimeAheadS} s) must be shorter than RETENTION_DAYS (${partial.retentionDays} days): a reading that far ahead would leave no time the table keeps`,
    );
  }
  if (localKeepS !== undefined && readingTimes.maxAgeS !== undefined && readingTimes.maxAgeS > localKeepS && !forwards) {
    problems.push(
      'MAX_TIME_AGE_DAYS accepts readings older than the local table keeps (RETENTION_DAYS less MAX_TIME_AHEAD_S): set it only with a remote sink that keeps them (UPSTREAM_URL, KAFKA_BROKERS or REMOTE_QUESTDB_URL)',
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const {
    kafkaBrokers,
    kafkaTopic,
    kafkaClientId,
    kafkaTls,
    kafkaTlsCaFile,
    kafkaSaslMechanism,
    kafkaSaslUsername,
    kafkaSaslPassword: _kafkaSaslPassword,
    kafkaSaslPasswordFile: _kafkaSaslPasswordFile,
    kafkaTimeoutMs,
    kafkaPolicy,
    kafkaBackfill,
    kafkaBatchReadings,
    kafkaFlushIntervalMs,
    kafkaCompression,
    kafkaOrder,
    kafkaMaxBytesPerS,
    kafkaCheapHours,
    apiKeyFile: _apiKeyFile,
    questdbPasswordFile: _questdbPasswordFile,
    grafanaAdminPassword: _grafanaAdminPassword,
    grafanaAdminPasswordFile: _grafanaAdminPasswordFile,
    consolePassword: _consolePassword,
    consolePasswordFile: _consolePasswordFile,
    metricsToken: _metricsToken,
    metricsTokenFile: _metricsTokenFile,
    localQuestdb,
    remoteQuestdbUrl: _remoteQuestdbUrl,
    remoteQuestdbTokenFile: _remoteQuestdbTokenFile,
    remoteQuestdbCaFile: _remoteQuestdbCaFile,
    remoteQuestdbTable: _remoteQuestdbTable,
    remoteQuestdbPolicy: _remoteQuestdbPolicy,
    remoteQuestdbBackfill: _remoteQuestdbBackfill,
    remoteQuestdbBatchReadings: _remoteQuestdbBatchReadings,
    remoteQuestdbFlushIntervalMs: _remoteQuestdbFlushIntervalMs,
    remoteQuestdbCompression: _remoteQuestdbCompression,
    remoteQuestdbMaxBytesPerS: _remoteQuestdbMaxBytesPerS,
    remoteQuestdbCheapHours: _remoteQuestdbCheapHours,
    upstreamUrl: _upstreamUrl,
    upstreamApiKey: _upstreamApiKey,
    upstreamApiKeyFile: _upstreamApiKeyFile,
    upstreamCaFile: _upstreamCaFile,
    upstreamProxy: _upstreamProxy,
    upstreamTimeoutMs: _upstreamTimeoutMs,
    upstreamMaxBodyBytes: _upstreamMaxBodyBytes,
    upstreamPolicy: _upstreamPolicy,
    upstreamBackfill: _upstreamBackfill,
    upstreamBatchReadings: _upstreamBatchReadings,
    upstreamFlushIntervalMs: _upstreamFlushIntervalMs,
    upstreamCompression: _upstreamCompression,
    upstreamOrder: _upstreamOrder,
    upstreamMaxBytesPerS: _upstreamMaxBytesPerS,
    upstreamCheapHours: _upstreamCheapHours,
    ...restWithMqtt
  } = values as SettingValues;
  const rest = withoutMqttSettings(restWithMqtt);
  const gatewayName = rest.gatewayName ?? hostname();
  // As the file system resolves it: every path made from it by joining names must be the kernel's.
  const dataDir = resolveDataDir(rest.dataDir);
  return {
    ...rest,
    dataDir,
    localQuestdb,
    siteId: site.name,
    siteIdSource: site.source,
    forwards,
    ...(remoteQuestdb === undefined ? {} : { remoteQuestdb }),
    gatewayName,
    apiKeysFile: rest.apiKeysFile ?? defaultKeysFile(dataDir),
    apiKey: apiKey?.secret ?? DEVELOPMENT_API_KEY,
    apiKeySource: apiKey?.source ?? 'development default',
    questdbPassword: questdbPassword?.secret,
    consolePassword: consolePassword?.secret,
    metricsToken: metricsToken?.secret,
    upstream,
    readingTimes,
    mqtt: restWithMqtt.mqtt
      ? {
          port: restWithMqtt.mqttPort,
          tlsPort: restWithMqtt.mqttTlsPort,
          anonymous: restWithMqtt.mqttAnonymous,
          maxPacketBytes: restWithMqtt.mqttMaxPacketBytes,
          maxInflight: restWithMqtt.mqttMaxInflight,
          keepAliveMaxS: restWithMqtt.mqttKeepAliveMaxS,
        }
      : undefined,
    mqttSubscribe:
      restWithMqtt.mqttSubscribeUrl === undefined || mqttMapping === undefined
        ? undefined
        : {
            url: restWithMqtt.mqttSubscribeUrl,
            clientId: restWithMqtt.mqttSubscribeClientId ?? `harbor-gateway-${gatewayName.replace(/[^A-Za-z0-9._-]/g, '_')}`.slice(0, 128),
            username: restWithMqtt.mqttSubscribeUsername,
            password: mqttPassword?.secret,
            caFile: restWithMqtt.mqttSubscribeCaFile,
            preset: restWithMqtt.mqttSubscribePreset,
            mapping: mqttMapping,
          },
    kafka:
      kafkaBrokers === undefined
        ? undefined
        : {
            brokers: kafkaBrokers,
            topic: kafkaTopic,
            clientId: kafkaClientId ?? `harbor-gateway-${gatewayName.replace(/[^A-Za-z0-9._-]/g, '_')}`,
            tls: kafkaTls || kafkaTlsCaFile !== undefined,
            tlsCaFile: kafkaTlsCaFile,
            sasl:
              kafkaSaslMechanism !== undefined && kafkaSaslUsername !== undefined && kafkaPassword !== undefined
                ? { mechanism: kafkaSaslMechanism, username: kafkaSaslUsername, password: kafkaPassword.secret }
                : undefined,
            timeoutMs: kafkaTimeoutMs,
            policy: kafkaPolicy,
            backfill: kafkaBackfill,
            batchReadings: kafkaBatchReadings,
            flushIntervalMs: kafkaFlushIntervalMs ?? rest.flushIntervalMs,
            compression: kafkaCompression,
            order: kafkaOrder,
            maxBytesPerS: kafkaMaxBytesPerS,
            cheapHours: kafkaCheapHours ?? [],
          },
  };
}

/** `localhost`, 127.0.0.0/8 and ::1 (bracketed or IPv4-mapped too): nobody else can reach such a listener. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const v4 = bare.startsWith('::ffff:') ? bare.slice(7) : bare;
  return bare === 'localhost' || bare === '::1' || /^127\.\d+\.\d+\.\d+$/.test(v4);
}

/**
 * Development's test credentials are for loopback only. Where the gateway can be reached from
 * elsewhere (`PUBLISHED_ADDRESS`, else `HOST`), an unset key (which would serve the public
 * development key), an empty one (never taken for unset there) or a shipped one is refused, and so
 * is a shipped Grafana password, as compose publishes Grafana on the same address.
 */
function checkExposure(
  problems: string[],
  env: Env,
  values: Partial<SettingValues>,
  apiKey: string | undefined,
  grafanaPassword: string | undefined,
): void {
  const reachable = values.publishedAddress ?? values.host ?? '0.0.0.0';
  if (isLoopbackHost(reachable)) return;
  const where = `the gateway is reachable beyond loopback (${values.publishedAddress === undefined ? 'HOST' : 'PUBLISHED_ADDRESS'}=${reachable})`;
  const fix =
    'set a key of your own (API_KEY_FILE, the api_key credential or API_KEY: openssl rand -hex 24), or listen on loopback only (HOST=127.0.0.1)';
  if (env['API_KEY'] === '' && apiKey === undefined) problems.push(`API_KEY is empty and ${where}: an empty key is no key; ${fix}`);
  else if (apiKey === undefined) problems.push(`API_KEY is unset, so devices would use the public development key, and ${where}: ${fix}`);
  else if (TEST_CREDENTIALS.has(apiKey)) problems.push(`API_KEY is a shipped test default and ${where}: ${fix}`);
  if (grafanaPassword !== undefined && TEST_CREDENTIALS.has(grafanaPassword)) {
    problems.push(
      `GRAFANA_ADMIN_PASSWORD is a shipped test default and the stack is published beyond loopback (${values.publishedAddress === undefined ? 'HOST' : 'PUBLISHED_ADDRESS'}=${reachable}): set a password of your own, or publish on 127.0.0.1`,
    );
  }
}

/**
 * The reading times accepted: up to MAX_TIME_AHEAD_S ahead of the gateway's clock and, while the
 * local table has a TTL, back to RETENTION_DAYS less that lead. QuestDB's TTL counts from the
 * table's newest time, which an accepted reading can put that far ahead: what is accepted is kept.
 */
function readingTimesOf(values: Partial<SettingValues>): Config['readingTimes'] {
  const maxAheadS = values.maxTimeAheadS ?? 86_400;
  if (values.maxTimeAgeDays !== undefined) {
    return { maxAheadS, maxAgeS: values.maxTimeAgeDays * 86_400, ageReason: `MAX_TIME_AGE_DAYS=${values.maxTimeAgeDays}` };
  }
  const keepS = localKeepSeconds(values);
  if (keepS === undefined) return { maxAheadS, maxAgeS: undefined };
  return { maxAheadS, maxAgeS: keepS, ageReason: `RETENTION_DAYS=${values.retentionDays}, less MAX_TIME_AHEAD_S` };
}

/** How far back the local table keeps every accepted reading, in seconds; undefined without a local TTL. */
function localKeepSeconds(values: Partial<SettingValues>): number | undefined {
  const retentionDays = values.retentionDays ?? 0;
  if (values.localQuestdb === false || retentionDays === 0) return undefined;
  return retentionDays * 86_400 - (values.maxTimeAheadS ?? 86_400);
}

/** The upstream sink when `UPSTREAM_URL` is set; its key is then required (a keyless request only earns 401s). */
function resolveUpstream(
  env: Env,
  problems: string[],
  readSecret: ReadSecret,
  values: Partial<SettingValues>,
): UpstreamSinkConfig | undefined {
  const key = resolveSecret(env, problems, readSecret, {
    value: values.upstreamApiKey,
    valueVar: 'UPSTREAM_API_KEY',
    file: values.upstreamApiKeyFile,
    fileVar: 'UPSTREAM_API_KEY_FILE',
    credential: 'upstream_api_key',
    pattern: API_KEY_PATTERN,
  });
  if (values.upstreamUrl === undefined) return undefined;
  if (key === undefined) {
    problems.push(
      'UPSTREAM_URL needs a key: UPSTREAM_API_KEY_FILE or the upstream_api_key credential (UPSTREAM_API_KEY outside production)',
    );
    return undefined;
  }
  // Settings with a default are missing here only when invalid, and then loadConfig throws anyway.
  return {
    url: values.upstreamUrl,
    apiKey: key.secret,
    apiKeySource: key.source,
    caFile: values.upstreamCaFile,
    proxy: values.upstreamProxy,
    timeoutMs: values.upstreamTimeoutMs!,
    maxBodyBytes: values.upstreamMaxBodyBytes!,
    policy: values.upstreamPolicy!,
    backfill: values.upstreamBackfill!,
    batchReadings: values.upstreamBatchReadings!,
    flushIntervalMs: values.upstreamFlushIntervalMs ?? values.flushIntervalMs!,
    compression: values.upstreamCompression!,
    order: values.upstreamOrder!,
    maxBytesPerS: values.upstreamMaxBytesPerS!,
    cheapHours: values.upstreamCheapHours ?? [],
  };
}

/** Where the device key file lives unless `API_KEYS_FILE` says otherwise: beside the queue. */
export const defaultKeysFile = (dataDir: string): string => join(dataDir, 'api-keys');

interface SecretSources {
  value: string | undefined;
  valueVar: string;
  file: string | undefined;
  fileVar: string;
  credential: string;
  /** Rule the file's content must follow, as the variable's schema does for its value. */
  pattern?: RegExp;
}

function resolveSecret(
  env: Env,
  problems: string[],
  readSecret: ReadSecret,
  sources: SecretSources,
): { secret: string; source: SecretSource } | undefined {
  if (sources.value !== undefined && sources.file !== undefined) {
    problems.push(`set only one of ${sources.valueVar} and ${sources.fileVar}`);
    return undefined;
  }
  if (sources.value !== undefined) return { secret: sources.value, source: 'environment' };
  const credentials = env['CREDENTIALS_DIRECTORY'];
  const path = sources.file ?? (credentials ? join(credentials, sources.credential) : undefined);
  if (path === undefined) return undefined;
  let content: string;
  try {
    content = readSecret(path).trim();
  } catch (error) {
    // A credentials directory need not hold every credential; an explicit file must exist.
    if (sources.file === undefined && (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    problems.push(`${sources.fileVar} cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'error'} (${path})`);
    return undefined;
  }
  if (content === '') {
    problems.push(`${sources.fileVar} points to an empty file (${path})`);
    return undefined;
  }
  if (sources.pattern !== undefined && !sources.pattern.test(content)) {
    problems.push(`${sources.fileVar}: the key in ${path} must be printable ASCII without spaces`);
    return undefined;
  }
  return { secret: content, source: sources.file !== undefined ? 'file' : 'systemd credential' };
}

/** The remote QuestDB sink's settings, checked together; undefined when REMOTE_QUESTDB_URL is unset. */
function remoteQuestDbConfig(
  env: Env,
  problems: string[],
  readSecret: ReadSecret,
  partial: Partial<SettingValues>,
): RemoteQuestDbConfig | undefined {
  const url = partial.remoteQuestdbUrl;
  if (url === undefined) {
    for (const name of ['REMOTE_QUESTDB_TOKEN_FILE', 'REMOTE_QUESTDB_CA_FILE'] as const) {
      if (env[name] !== undefined && env[name] !== '') problems.push(`${name} is set but REMOTE_QUESTDB_URL is not`);
    }
    return undefined;
  }
  const token = resolveSecret(env, problems, readSecret, {
    value: undefined,
    valueVar: 'REMOTE_QUESTDB_TOKEN',
    file: partial.remoteQuestdbTokenFile,
    fileVar: 'REMOTE_QUESTDB_TOKEN_FILE',
    credential: 'remote_questdb_token',
    pattern: API_KEY_PATTERN,
  });
  let ca: string | undefined;
  const caFile = partial.remoteQuestdbCaFile;
  if (caFile !== undefined) {
    if (!url.startsWith('https:')) problems.push('REMOTE_QUESTDB_CA_FILE needs an https:// REMOTE_QUESTDB_URL');
    ca = readCertificates(problems, readSecret, caFile);
  }
  return {
    url,
    token: token?.secret,
    ca,
    table: partial.remoteQuestdbTable ?? 'cargo_data',
    policy: partial.remoteQuestdbPolicy ?? 'drop_oldest',
    backfill: partial.remoteQuestdbBackfill ?? false,
    batchReadings: partial.remoteQuestdbBatchReadings ?? 20_000,
    flushIntervalMs: partial.remoteQuestdbFlushIntervalMs ?? partial.flushIntervalMs ?? 1000,
    compression: partial.remoteQuestdbCompression ?? 'gzip',
    maxBytesPerS: partial.remoteQuestdbMaxBytesPerS ?? 0,
    cheapHours: partial.remoteQuestdbCheapHours ?? [],
  };
}

/** A PEM file of certificates, refused at start rather than at the first connection. */
function readCertificates(problems: string[], readSecret: ReadSecret, path: string): string | undefined {
  let pem: string;
  try {
    pem = readSecret(path);
  } catch (error) {
    problems.push(`REMOTE_QUESTDB_CA_FILE cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'error'} (${path})`);
    return undefined;
  }
  try {
    new X509Certificate(pem);
  } catch {
    problems.push(`REMOTE_QUESTDB_CA_FILE holds no PEM certificate (${path})`);
    return undefined;
  }
  return pem;
}

function checkProductionRemote(problems: string[], remote: RemoteQuestDbConfig): void {
  if (!remote.url.startsWith('https:'))
    problems.push('REMOTE_QUESTDB_URL must be https:// in production: readings and token would cross the network in clear');
  if (remote.token === undefined) {
    problems.push('the remote QuestDB needs a token in production (REMOTE_QUESTDB_TOKEN_FILE or the remote_questdb_token credential)');
  }
  checkProductionSecret(problems, 'the remote QuestDB token', remote.token);
}

function checkProductionSecret(problems: string[], name: string, secret: string | undefined): void {
  if (secret === undefined) return;
  if (TEST_CREDENTIALS.has(secret.toLowerCase())) {
    problems.push(`${name} is a shipped test default; set your own before running in production`);
  } else if (secret.length < MIN_PRODUCTION_SECRET_LENGTH) {
    problems.push(`${name} must be at least ${MIN_PRODUCTION_SECRET_LENGTH} characters in production`);
  }
}
