import cron from 'node-cron';
import * as z from 'zod';
import { parseDailyWindows } from './daily-windows.js';
import { parseByteSize } from './size.js';

/**
 * Every setting the gateway reads from its environment: the single source for parsing,
 * defaults and the configuration reference, docs/configuration.md (see `harbor-gateway config-table`).
 */
export interface Setting<T> {
  readonly env: string;
  /** Text default as it would appear in the environment; undefined = unset. */
  readonly default: string | undefined;
  readonly doc: string;
  readonly schema: z.ZodType<T>;
  /** Never echo the value back in errors or logs. */
  readonly secret?: boolean;
}

const integer = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

const byteSize = (min: number, max: number) =>
  z
    .string()
    .transform((text, ctx) => {
      const bytes = parseByteSize(text);
      if (bytes === null) {
        ctx.addIssue({ code: 'custom', message: 'must be a size such as 1048576, 512KiB or 1GiB' });
        return z.NEVER;
      }
      return bytes;
    })
    .pipe(z.number().min(min, `must be at least ${min} bytes`).max(max, `must be at most ${max} bytes`));

const text = (max = 4096) => z.string().min(1, 'must not be empty').max(max);

const dailyWindows = z.string().transform((value, ctx) => {
  const windows = parseDailyWindows(value);
  if (typeof windows === 'string') {
    ctx.addIssue({ code: 'custom', message: windows });
    return z.NEVER;
  }
  return windows;
});

/** The API key travels in an HTTP header, where only visible ASCII survives every client and proxy. */
export const API_KEY_PATTERN = /^[\x21-\x7e]+$/;
const apiKeyText = text().regex(API_KEY_PATTERN, 'must be printable ASCII without spaces');

/** An http(s) URL without credentials in it; `hint` says where the credentials go instead. */
const webUrl = (hint: string) =>
  z
    .string()
    .trim()
    .refine((value) => {
      try {
        const url = new URL(value);
        return (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === '';
      } catch {
        return false;
      }
    }, `must be an http:// or https:// URL without credentials (${hint})`);

/** The URL's part `pick` takes, or undefined when it is no URL (webUrl names that problem). */
const urlPart = (value: string, pick: (url: URL) => string): string | undefined => {
  try {
    return pick(new URL(value));
  } catch {
    return undefined;
  }
};

/** A QuestDB server's base URL: no query, no trailing slash (the client adds `/write` and `/exec`). */
const questDbUrl = (hint: string) =>
  webUrl(hint)
    .refine((value) => !urlPart(value, (url) => url.search), 'must have no query')
    .transform((value) => value.replace(/\/+$/, ''));

/** The ingest API's batch path: a gateway's or self-hosted stack's, or the hosted forms with a harbor id (behind any prefix a proxy adds). */
const BATCH_PATH = /\/api\/v[12]\/ingest(?:\/[^/]+){0,2}\/batch\/?$/;

const boolean = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'], 'must be true or false'))
  .transform((value) => ['true', '1', 'yes', 'on'].includes(value));

const cronExpression = z
  .string()
  .trim()
  .refine((value) => cron.validate(value), 'must be a cron expression, e.g. */10 * * * * * (seconds first, optional)');

/** The upstream's batch endpoint, kept as written (hosted paths differ); its key goes in a header, never the URL. */
const upstreamUrl = webUrl('the key goes in UPSTREAM_API_KEY_FILE').refine(
  (value) => BATCH_PATH.test(urlPart(value, (url) => url.pathname) ?? ''),
  'must be the whole batch endpoint: …/api/v2/ingest/batch for a gateway or self-hosted stack, …/api/v2/ingest/{harbor_id}/batch for the hosted service (a URL without that path is answered 404 forever)',
);

const proxyUrl = z
  .string()
  .trim()
  .refine((value) => {
    try {
      const url = new URL(value);
      return url.protocol === 'http:' && url.username === '' && url.password === '' && (url.pathname === '/' || url.pathname === '');
    } catch {
      return false;
    }
  }, 'must be http://host:port, without credentials or a path');

/** An MQTT topic filter: `+` stands for a whole level, `#` only for the last. */
const isTopicFilter = (filter: string): boolean =>
  filter
    .split('/')
    .every((level, i, levels) => (level.includes('#') ? level === '#' && i === levels.length - 1 : !level.includes('+') || level === '+'));

const sinkPolicy = z.enum(['block', 'drop_oldest']);
const sinkOrder = z.enum(['oldest_first', 'current_first']);

const define = <T>(setting: Setting<T>): Setting<T> => setting;

export const SETTINGS = {
  environment: define({
    env: 'GATEWAY_ENV',
    default: 'development',
    doc: '`development` or `production`. Production refuses to start with a missing, short or shipped test credential.',
    schema: z.enum(['development', 'production']),
  }),
  host: define({
    env: 'HOST',
    default: '0.0.0.0',
    doc: 'Address the HTTP, HTTPS and MQTT servers bind to. Sensors reach the gateway over the LAN, so all interfaces by default; but in development while `API_KEY` is unset, `127.0.0.1`, as the development key is public. Beyond loopback the gateway refuses to start with an unset, empty or shipped `API_KEY` (see `PUBLISHED_ADDRESS`).',
    schema: text(255),
  }),
  publishedAddress: define({
    env: 'PUBLISHED_ADDRESS',
    default: undefined,
    doc: "Where the gateway's ports are reachable when something in front of it forwards them: the host address a container's ports are published on (compose.yaml passes the one it publishes on). Unset: `HOST`. The gateway judges by it whether it is reachable beyond loopback, where it refuses an unset, empty or shipped `API_KEY`, and a shipped `GRAFANA_ADMIN_PASSWORD` (Grafana is published on the same address). Set it only to the address the ports are really published on.",
    schema: text(255),
  }),
  port: define({
    env: 'PORT',
    default: '8000',
    doc: 'HTTP port of the ingest API, health and status endpoints. 0 picks a free port.',
    schema: integer(0, 65535),
  }),
  httpsPort: define({
    env: 'HTTPS_PORT',
    default: '8443',
    doc: 'HTTPS port (TLS 1.2/1.3) of the same API. `PORT` also answers TLS, told apart by the first byte, for devices whose TLS client ignores the URL scheme. 0 picks a free port.',
    schema: integer(0, 65535),
  }),
  tlsCertFile: define({
    env: 'TLS_CERT_FILE',
    default: undefined,
    doc: 'PEM certificate (chain) for HTTPS, with `TLS_KEY_FILE`. Else systemd credentials `tls_cert` and `tls_key`, else a self-signed ECDSA certificate generated once in `DATA_DIR/tls`. Re-read on SIGHUP.',
    schema: text(),
  }),
  tlsKeyFile: define({
    env: 'TLS_KEY_FILE',
    default: undefined,
    doc: 'PEM private key (unencrypted) of `TLS_CERT_FILE`.',
    schema: text(),
  }),
  apiKey: define({
    env: 'API_KEY',
    default: undefined,
    doc: 'A key devices send in `X-API-Key`, known as the key named `default` (allowed every ship): printable ASCII without spaces. Per-device keys live in `API_KEYS_FILE`. Prefer `API_KEY_FILE` or a systemd credential named `api_key`. In development an unset key falls back to the test key `harbor-dev-key`, on loopback only: where the gateway is reachable beyond loopback (`HOST`, `PUBLISHED_ADDRESS`) an unset, empty or shipped key stops the start.',
    schema: apiKeyText,
    secret: true,
  }),
  apiKeyFile: define({
    env: 'API_KEY_FILE',
    default: undefined,
    doc: 'File holding the ingestion key (container secrets). `$CREDENTIALS_DIRECTORY/api_key` is read automatically under systemd.',
    schema: text(),
  }),
  apiKeysFile: define({
    env: 'API_KEYS_FILE',
    default: undefined,
    doc: 'The device key file written by `harbor-gateway keys` (one line per key: name, key hash, optional ship_id prefix). Default: `api-keys` in `DATA_DIR`. Changes are picked up without a restart.',
    schema: text(),
  }),
  apiKeysPollMs: define({
    env: 'API_KEYS_POLL_MS',
    default: '2000',
    doc: "How often the key file is checked for changes besides the kernel's notifications on it, which apply a change within milliseconds: a file made where there was none, a file system without notifications. SIGHUP re-reads it at once.",
    schema: integer(50, 600_000),
  }),
  harborId: define({
    env: 'HARBOR_ID',
    default: undefined,
    doc: 'When set, hosted-form paths must carry this harbor id (others get 404). When unset, any harbor id is accepted.',
    schema: z.string().regex(/^[A-Za-z0-9_.~-]{1,128}$/, 'must be 1-128 characters of A-Z a-z 0-9 _ . ~ -'),
  }),
  dataDir: define({
    env: 'DATA_DIR',
    default: './data',
    doc: 'Directory of the SQLite write-ahead queue (`queue.db`). Give it its own path on the appliance.',
    schema: text(),
  }),
  durability: define({
    env: 'DURABILITY',
    default: 'power-loss',
    doc: '`power-loss`: every commit is fsynced, an answered reading survives a power cut. `process-crash`: commits reach the OS but are not fsynced; survives a gateway crash or kill, not a power cut; faster and fewer writes.',
    schema: z.enum(['power-loss', 'process-crash']),
  }),
  queueMaxBytes: define({
    env: 'QUEUE_MAX_BYTES',
    default: '1GiB',
    doc: 'Bound of queued reading data on disk. The local QuestDB sink and `block` sinks never drop: when they hold the queue at the bound, ingest answers 503 with `Retry-After` (naming the sink) and nothing queued is dropped. A remote sink with the `drop_oldest` policy (the default) skips its own oldest readings, counted and logged, once the queue passes 90 % of the bound. Keep it well below the free space of the data directory.',
    schema: byteSize(1024 * 1024, Number.MAX_SAFE_INTEGER),
  }),
  commitWindowMs: define({
    env: 'COMMIT_WINDOW_MS',
    default: '0',
    doc: 'How long a request waits for others to share its commit (one write to the queue file and, in `power-loss` mode, one fsync for all). 0 commits after one turn of the event loop, which groups only what arrived together. With many sensors at tens to hundreds of requests a second, 20 ms cuts the bytes written to an SD card per reading two to five times (`docs/benchmarks.md`), and every answer comes up to that much later; a device that sends one reading at a time, waiting for each answer, then sends at most 1000 / `COMMIT_WINDOW_MS` readings a second.',
    schema: integer(0, 1000),
  }),
  maxBodyBytes: define({
    env: 'MAX_BODY_BYTES',
    default: '1MiB',
    doc: 'Largest request body accepted; larger bodies get 413 before they are read.',
    schema: byteSize(1024, 64 * 1024 * 1024),
  }),
  maxInflightBytes: define({
    env: 'MAX_INFLIGHT_BYTES',
    default: '8MiB',
    doc: 'Request bytes held in memory at once, all requests together (a chunked body counts as `MAX_BODY_BYTES`). Requests beyond it get 503 with `Retry-After` before they are read, which bounds memory under any load.',
    schema: byteSize(64 * 1024, 1024 * 1024 * 1024),
  }),
  maxBatchReadings: define({
    env: 'MAX_BATCH_READINGS',
    default: '10000',
    doc: 'Most readings in one batch; more gets 400.',
    schema: integer(1, 1_000_000),
  }),
  maxIdLength: define({
    env: 'MAX_ID_LENGTH',
    default: '100',
    doc: 'Longest `ship_id` or `cargo_id`, in Unicode characters.',
    schema: integer(1, 1000),
  }),
  questdbUrl: define({
    env: 'QUESTDB_URL',
    default: 'http://127.0.0.1:9000',
    doc: 'QuestDB HTTP endpoint, used for ILP writes (`/write`) and table setup (`/exec`).',
    schema: questDbUrl('use QUESTDB_USERNAME and QUESTDB_PASSWORD'),
  }),
  questdbUsername: define({
    env: 'QUESTDB_USERNAME',
    default: undefined,
    doc: 'User for QuestDB HTTP basic authentication, when QuestDB requires it.',
    schema: text(255),
  }),
  questdbPassword: define({
    env: 'QUESTDB_PASSWORD',
    default: undefined,
    doc: 'Password for QuestDB HTTP basic authentication. Prefer `QUESTDB_PASSWORD_FILE` or a systemd credential named `questdb_password`.',
    schema: text(),
    secret: true,
  }),
  questdbPasswordFile: define({
    env: 'QUESTDB_PASSWORD_FILE',
    default: undefined,
    doc: 'File holding the QuestDB password.',
    schema: text(),
  }),
  table: define({
    env: 'QUESTDB_TABLE',
    default: 'cargo_data',
    doc: 'Table the readings go to. Keep `cargo_data` so SQL written for the existing stack keeps working.',
    schema: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,126}$/, 'must be a plain identifier (letters, digits, underscore)'),
  }),
  retentionDays: define({
    env: 'RETENTION_DAYS',
    default: '365',
    doc: 'QuestDB TTL of the table in days, applied at every start (changing it and restarting changes the TTL). 0 keeps data forever.',
    schema: integer(0, 36500),
  }),
  maxTimeAheadS: define({
    env: 'MAX_TIME_AHEAD_S',
    default: '86400',
    doc: "Latest reading time accepted, in seconds ahead of the gateway's clock; later times get 422 `datetime_future` (503 while the gateway's clock is not synchronised). Must be shorter than `RETENTION_DAYS`: readings are accepted back to `RETENTION_DAYS` less this lead, so no accepted reading can make the table's TTL drop another.",
    schema: integer(1, 9_999_999_999),
  }),
  maxTimeAgeDays: define({
    env: 'MAX_TIME_AGE_DAYS',
    default: undefined,
    doc: "Oldest reading time accepted, in days before the gateway's clock; older times get 422 `datetime_past`. Unset: what the local table keeps (`RETENTION_DAYS` less `MAX_TIME_AHEAD_S`), or back to 1970 without a TTL. Longer only for a remote sink that keeps longer (a central tier): the local QuestDB sink then does not write what its table would drop and counts it as `expired` in `/status`, never as delivered.",
    schema: integer(1, 36500),
  }),
  flushIntervalMs: define({
    env: 'FLUSH_INTERVAL_MS',
    default: '1000',
    doc: "How often the local QuestDB sink ships what queued since its last delivery, and each remote sink whose own interval is unset (`UPSTREAM_FLUSH_INTERVAL_MS`, `KAFKA_FLUSH_INTERVAL_MS`, `REMOTE_QUESTDB_FLUSH_INTERVAL_MS`). A backlog of a sink's batch size goes before its interval ends.",
    schema: integer(10, 3_600_000),
  }),
  flushBatchReadings: define({
    env: 'FLUSH_BATCH_READINGS',
    default: '20000',
    doc: 'Most readings sent in one ILP request. A backlog of this many readings triggers a flush before the interval ends.',
    schema: integer(1, 1_000_000),
  }),
  flushTimeoutMs: define({
    env: 'FLUSH_TIMEOUT_MS',
    default: '30000',
    doc: 'How long one ILP request may take before it counts as failed and is retried.',
    schema: integer(100, 600_000),
  }),
  replayWindowMs: define({
    env: 'REPLAY_WINDOW_MS',
    default: '60000',
    doc: "How long readings the local QuestDB acknowledged stay in the queue file: after a power cut QuestDB may have lost what it acknowledged within the kernel's writeback age (about 30 s), so at every start and whenever QuestDB answers again after a failure the gateway resumes a suspended table and sends these readings again (deduplication stores them once). They are not counted in `QUEUE_MAX_BYTES`. 0 lets readings go as soon as QuestDB acknowledges them.",
    schema: integer(0, 3_600_000),
  }),
  flushBackoffMaxMs: define({
    env: 'FLUSH_BACKOFF_MAX_MS',
    default: '30000',
    doc: 'Longest wait between retries after failed flushes (exponential backoff with jitter, from 250 ms).',
    schema: integer(250, 3_600_000),
  }),
  authFailureDelayMaxMs: define({
    env: 'AUTH_FAILURE_DELAY_MAX_MS',
    default: '500',
    doc: "Longest delay of a wrong-key answer. Each wrong or missing `X-API-Key` from one client address doubles the delay of its next 401, from 100 ms up to this. At most 1000: a refusal must reach a device within its read timeout (1 s for Arduino's `Stream`, 5 s for the ESP32 and ESP8266 `HTTPClient`), or it retries instead of reporting its wrong key. Requests with a valid key are never delayed or refused, whatever their address did.",
    schema: integer(0, 1000),
  }),
  authFailureWindowS: define({
    env: 'AUTH_FAILURE_WINDOW_S',
    default: '60',
    doc: 'An address that sent no wrong key for this many seconds starts again from the shortest delay.',
    schema: integer(1, 86_400),
  }),
  maxConnections: define({
    env: 'MAX_CONNECTIONS',
    default: '1024',
    doc: "Most simultaneous connections, HTTP, HTTPS and MQTT together. Of these, `MAX_UNPROVEN_CONNECTIONS` may be connections that have not shown a device key; the rest are kept for devices. A new connection that finds no room closes an unproven connection (see `MAX_UNPROVEN_CONNECTIONS`); only when every connection is a device's is it closed at once.",
    schema: integer(2, 1_000_000),
  }),
  maxUnprovenConnections: define({
    env: 'MAX_UNPROVEN_CONNECTIONS',
    default: '128',
    doc: "Most connections at once that have not yet shown a device key (an HTTP request with a valid `X-API-Key`, an accepted MQTT CONNECT): console browsers, scrapes, wrong keys, idle sockets, and every device's new connection before its first request. When they are all taken, a new connection closes one of them: one that never sent a byte, else one idle from the host (an IPv4 address, an IPv6 /64) holding the most, else the oldest whose request is still being answered. Less than `MAX_CONNECTIONS`.",
    schema: integer(1, 1_000_000),
  }),
  unprovenTimeoutMs: define({
    env: 'UNPROVEN_TIMEOUT_MS',
    default: '5000',
    doc: 'How long a connection that has not shown a device key may sit without a request in progress: the time to finish the TLS handshake and send the headers (or the MQTT CONNECT), and an idle keep-alive after a console page. Then it is closed without an answer. Set no shorter than `HEADERS_TIMEOUT_MS`, 1.5 times `HEADERS_TIMEOUT_MS` applies, so a client mid-headers gets its 408 first.',
    schema: integer(100, 600_000),
  }),
  headersTimeoutMs: define({
    env: 'HEADERS_TIMEOUT_MS',
    default: '10000',
    doc: 'Time a client has to send its request headers, counted from the connection for a new one (then 408 and close).',
    schema: integer(100, 600_000),
  }),
  requestTimeoutMs: define({
    env: 'REQUEST_TIMEOUT_MS',
    default: '30000',
    doc: 'Time a client has to send its whole request, body included.',
    schema: integer(100, 3_600_000),
  }),
  keepAliveTimeoutMs: define({
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    default: '5000',
    doc: 'How long an idle keep-alive connection stays open.',
    schema: integer(100, 600_000),
  }),
  shutdownTimeoutMs: define({
    env: 'SHUTDOWN_TIMEOUT_MS',
    default: '10000',
    doc: 'On SIGTERM/SIGINT: time for in-flight requests and a last flush before the queue is closed. Unflushed readings stay queued for the next start.',
    schema: integer(0, 600_000),
  }),
  grafanaAdminPassword: define({
    env: 'GRAFANA_ADMIN_PASSWORD',
    default: undefined,
    doc: "The stack's Grafana admin password, given to the gateway only so it refuses to start while it is a shipped default in production, or anywhere the stack is published beyond loopback (`PUBLISHED_ADDRESS`). Prefer `GRAFANA_ADMIN_PASSWORD_FILE`.",
    schema: text(),
    secret: true,
  }),
  grafanaAdminPasswordFile: define({
    env: 'GRAFANA_ADMIN_PASSWORD_FILE',
    default: undefined,
    doc: 'File holding the Grafana admin password (checked, never used).',
    schema: text(),
  }),
  console: define({
    env: 'CONSOLE',
    default: 'on',
    doc: '`on` or `off`. `off`: no local console and no `/metrics` (both answer 404), and none of their code loaded or memory held. On, the console stays locked until it has a password (`CONSOLE_PASSWORD`).',
    schema: boolean,
  }),
  consolePassword: define({
    env: 'CONSOLE_PASSWORD',
    default: undefined,
    doc: 'Password of the local console (`https://<gateway>:<HTTPS_PORT>/console/`), distinct from every device key: no device key opens the console. Prefer `CONSOLE_PASSWORD_FILE` or a systemd credential named `console_password`. Unset: the console only says how to set one. Production refuses a shipped or short one, and one equal to `API_KEY`.',
    schema: text(),
    secret: true,
  }),
  consolePasswordFile: define({
    env: 'CONSOLE_PASSWORD_FILE',
    default: undefined,
    doc: 'File holding the console password. `$CREDENTIALS_DIRECTORY/console_password` is read automatically under systemd.',
    schema: text(),
  }),
  metricsToken: define({
    env: 'METRICS_TOKEN',
    default: undefined,
    doc: '`/metrics` (Prometheus text format) answers loopback clients; others must send `Authorization: Bearer` with this token. Unset: loopback only. Prefer `METRICS_TOKEN_FILE` or a systemd credential named `metrics_token`.',
    schema: apiKeyText,
    secret: true,
  }),
  loginAttemptsPerMinute: define({
    env: 'LOGIN_ATTEMPTS_PER_MINUTE',
    default: '30',
    doc: 'Console login attempts whose password is checked in any minute, from every address but loopback together; past it a login is answered 429 with `Retry-After` at once, its password not checked. Each host (an IPv4 address, an IPv6 /64) is also held to its own spacing: 250 ms between attempts, doubling with each failure up to 8 s. Device traffic is never counted.',
    schema: integer(1, 10_000),
  }),
  metricsTokenFile: define({
    env: 'METRICS_TOKEN_FILE',
    default: undefined,
    doc: 'File holding the `/metrics` token.',
    schema: text(),
  }),
  gatewayName: define({
    env: 'GATEWAY_NAME',
    default: undefined,
    doc: 'Name of this gateway in its health rows; the host name when unset.',
    schema: text(128),
  }),
  siteId: define({
    env: 'SITE_ID',
    default: undefined,
    doc: "The site this gateway's readings come from, stored with each reading (the `site` column, part of the deduplication key) and sent with every reading it forwards (upstream, Kafka, remote QuestDB), so a central table tells sites apart although their ship ids repeat. 1-128 characters, any letters, no control characters. Default: `GATEWAY_NAME`, else the host name (the appliance sets `GATEWAY_NAME` from `SITE_NAME`, else from its unique host name).",
    // The rule of src/reading/site-id.ts, which this layer cannot import.
    schema: z
      .string()
      .refine(
        (value) => value.trim() === value && [...value].length <= 128 && !/\p{Cc}/u.test(value),
        'must be 1-128 characters without control characters or surrounding spaces',
      ),
  }),
  siteClaimExpiryDays: define({
    env: 'SITE_CLAIM_EXPIRY_DAYS',
    default: '7',
    doc: "How long a site's owner may be silent before its claim lapses, in days. A central gateway gives each site id to the first gateway instance that forwards under it and refuses another instance's readings for it (409 `site_claimed`); after this silence of the owner the next claimant takes the site. The remote QuestDB sink applies the same rule to the claims in its table. 0: a claim lasts until it is released (`harbor-gateway site-claims release SITE`, the console).",
    schema: integer(0, 3650),
  }),
  healthReport: define({
    env: 'HEALTH_REPORT',
    default: 'true',
    doc: "Write the gateway's own health (its state in words, queue depth and size, oldest queued age, flush errors, dead letters, clock) to the QuestDB table `gateway_health`, per-key counters to `gateway_key_health` and per-sink backlog and counters to `gateway_sink_health`, at each housekeeping run, for the dashboard and its alerts.",
    schema: boolean,
  }),
  catalogueFile: define({
    env: 'CATALOGUE_FILE',
    default: undefined,
    doc: "The site's catalogue (YAML, see `systemd/catalogue.yaml` and docs/grafana.md): ship display names, and per cargo id or pattern (`temp*`) its name, unit, normal range and decimals, for the dashboards and the out-of-range alert. Written to QuestDB (`cargo_catalogue`, `ship_catalogue`) at start and whenever the file changes (checked every 2 s, and on SIGHUP); a file with a mistake is refused whole and logged, the one loaded before stays. Unset or missing: ids show as they are.",
    schema: text(),
  }),
  housekeepingCron: define({
    env: 'HOUSEKEEPING_CRON',
    default: '*/10 * * * * *',
    doc: 'When housekeeping runs (node-cron syntax, seconds first): health row, pick-up of dead letters re-queued from the CLI, hand-back of free queue pages once a backlog has drained.',
    schema: cronExpression,
  }),
  logLevel: define({
    env: 'LOG_LEVEL',
    default: 'info',
    doc: '`fatal`, `error`, `warn`, `info`, `debug` or `trace`. Info logs one line per flush and per error, not per request.',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  }),
  localQuestdb: define({
    env: 'LOCAL_QUESTDB',
    default: 'on',
    doc: '`on` or `off`. `off`: no local QuestDB sink, for a site that only forwards to its sinks (set at least one); the health rows then go to the remote QuestDB when there is one.',
    schema: boolean,
  }),
  remoteQuestdbUrl: define({
    env: 'REMOTE_QUESTDB_URL',
    default: undefined,
    doc: 'A remote QuestDB (QuestDB Enterprise or a central server) that gets every reading over ILP/HTTP, beside or instead of the local one, e.g. `https://questdb.example.com:9000`. Unset: no remote QuestDB sink. Production requires `https://` and a token.',
    schema: questDbUrl('the token comes from REMOTE_QUESTDB_TOKEN_FILE'),
  }),
  remoteQuestdbTokenFile: define({
    env: 'REMOTE_QUESTDB_TOKEN_FILE',
    default: undefined,
    doc: "File holding the remote QuestDB's token, sent as `Authorization: Bearer` (QuestDB Enterprise: a service account's REST token). Or a systemd credential named `remote_questdb_token`.",
    schema: text(),
  }),
  remoteQuestdbCaFile: define({
    env: 'REMOTE_QUESTDB_CA_FILE',
    default: undefined,
    doc: "PEM file of the authorities the remote QuestDB's certificate must chain to, instead of those Node trusts by default (for a private CA or a self-signed certificate).",
    schema: text(),
  }),
  remoteQuestdbTable: define({
    env: 'REMOTE_QUESTDB_TABLE',
    default: 'cargo_data',
    doc: "Table of the remote QuestDB the readings go to; created with deduplication on `(time, ship_id, cargo_id, site)` when missing. Many sites may share it: each row's `site` (this gateway's `SITE_ID`) tells them apart, since ship ids repeat from site to site.",
    schema: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,126}$/, 'must be a plain identifier (letters, digits, underscore)'),
  }),
  remoteQuestdbPolicy: define({
    env: 'REMOTE_QUESTDB_POLICY',
    default: 'drop_oldest',
    doc: 'When the queue is full because the remote QuestDB is far behind: `drop_oldest` skips its oldest readings (counted and logged; the site keeps taking readings), `block` refuses new readings with 503 until it catches up.',
    schema: sinkPolicy,
  }),
  remoteQuestdbBackfill: define({
    env: 'REMOTE_QUESTDB_BACKFILL',
    default: 'off',
    doc: '`off`: a remote QuestDB sink added to a running site starts at the newest reading. `on`: it starts with the oldest reading still queued.',
    schema: boolean,
  }),
  remoteQuestdbBatchReadings: define({
    env: 'REMOTE_QUESTDB_BATCH_READINGS',
    default: '20000',
    doc: 'Most readings in one ILP request to the remote QuestDB.',
    schema: integer(1, 1_000_000),
  }),
  remoteQuestdbFlushIntervalMs: define({
    env: 'REMOTE_QUESTDB_FLUSH_INTERVAL_MS',
    default: undefined,
    doc: 'How often the remote QuestDB sink sends what queued since its last delivery, as `UPSTREAM_FLUSH_INTERVAL_MS`. Unset: `FLUSH_INTERVAL_MS`.',
    schema: integer(10, 3_600_000),
  }),
  remoteQuestdbCompression: define({
    env: 'REMOTE_QUESTDB_COMPRESSION',
    default: 'gzip',
    doc: "`gzip`: ILP requests to the remote QuestDB go gzip-compressed once its build (`SELECT build()`, asked once) shows a release that reads them, QuestDB 9.1 or later; to an older one, plain. QuestDB's ILP/HTTP takes no other coding. `off`: plain always.",
    schema: z.enum(['gzip', 'off']),
  }),
  remoteQuestdbMaxBytesPerS: define({
    env: 'REMOTE_QUESTDB_MAX_BYTES_PER_S',
    default: '0',
    doc: "The remote QuestDB sink's bandwidth budget, as `UPSTREAM_MAX_BYTES_PER_S`; `0`: no budget. It sends in queue order (its replay window decides so): no `current_first`.",
    schema: byteSize(0, 1024 * 1024 * 1024),
  }),
  remoteQuestdbCheapHours: define({
    env: 'REMOTE_QUESTDB_CHEAP_HOURS',
    default: undefined,
    doc: "Times of day without the remote QuestDB sink's bandwidth budget, as `UPSTREAM_CHEAP_HOURS`.",
    schema: dailyWindows,
  }),
  upstreamUrl: define({
    env: 'UPSTREAM_URL',
    default: undefined,
    doc: "Forward every reading to another ingest API: the whole batch endpoint URL, e.g. the hosted `https://host/api/v2/ingest/{harbor_id}/batch`, a self-hosted stack's or another gateway's `…/api/v2/ingest/batch`. Unset: no upstream sink. Readings go in queue order with their stored time (RFC 3339, nanoseconds), so a replay lands on the same keys.",
    schema: upstreamUrl,
    // A refused value is not echoed: it may carry the credentials that made it refused.
    secret: true,
  }),
  upstreamApiKey: define({
    env: 'UPSTREAM_API_KEY',
    default: undefined,
    doc: 'The `X-API-Key` of the upstream destination. Refused in production: use `UPSTREAM_API_KEY_FILE` or a systemd credential named `upstream_api_key`.',
    schema: apiKeyText,
    secret: true,
  }),
  upstreamApiKeyFile: define({
    env: 'UPSTREAM_API_KEY_FILE',
    default: undefined,
    doc: 'File holding the upstream key. `$CREDENTIALS_DIRECTORY/upstream_api_key` is read automatically under systemd.',
    schema: text(),
  }),
  upstreamCaFile: define({
    env: 'UPSTREAM_CA_FILE',
    default: undefined,
    doc: "PEM certificate(s) the upstream's HTTPS certificate must chain to (a private CA, or a gateway's self-signed certificate). Unset: the system's CA bundle (`/etc/ssl/certs/ca-certificates.crt` and its equivalents), else Node's built-in list.",
    schema: text(),
  }),
  upstreamProxy: define({
    env: 'UPSTREAM_PROXY',
    default: undefined,
    doc: 'HTTP proxy for the upstream, `http://host:port`: `https://` destinations are reached through a CONNECT tunnel (TLS end to end), `http://` ones through plain proxy requests.',
    schema: proxyUrl,
    // A refused value is not echoed: it may carry the credentials that made it refused.
    secret: true,
  }),
  upstreamTimeoutMs: define({
    env: 'UPSTREAM_TIMEOUT_MS',
    default: '30000',
    doc: 'How long one upstream request may take, connection and answer included, before it counts as failed and is retried.',
    schema: integer(100, 600_000),
  }),
  upstreamMaxBodyBytes: define({
    env: 'UPSTREAM_MAX_BODY_BYTES',
    default: '1MiB',
    doc: "Largest request body sent upstream (a gateway's `MAX_BODY_BYTES` default). A 413 answer, or a 400 that names no reading, halves the batch until the destination takes it.",
    schema: byteSize(1024, 64 * 1024 * 1024),
  }),
  upstreamPolicy: define({
    env: 'UPSTREAM_POLICY',
    default: 'drop_oldest',
    doc: '`drop_oldest`: when the queue is full because the upstream is far behind, the upstream sink skips its oldest readings (counted and logged) and the site keeps taking readings. `block`: ingest answers 503 until the upstream catches up.',
    schema: sinkPolicy,
  }),
  upstreamBackfill: define({
    env: 'UPSTREAM_BACKFILL',
    default: 'off',
    doc: '`off`: an upstream sink added to a running site starts at the newest reading. `on`: it starts with the oldest reading still queued.',
    schema: boolean,
  }),
  upstreamBatchReadings: define({
    env: 'UPSTREAM_BATCH_READINGS',
    default: '1000',
    doc: 'Most readings in one upstream request (a gateway takes up to its `MAX_BATCH_READINGS`, 10000 by default).',
    schema: integer(1, 100_000),
  }),
  upstreamFlushIntervalMs: define({
    env: 'UPSTREAM_FLUSH_INTERVAL_MS',
    default: undefined,
    doc: "How often the upstream sink sends what queued since its last delivery. Unset: `FLUSH_INTERVAL_MS`, which the local QuestDB sink keeps whatever this says. Longer, each request carries more rounds of a site's readings and compresses better (10000 to 20000 on a metered link, docs/fleet.md), and the centre is that much later; a backlog of `UPSTREAM_BATCH_READINGS` goes at once, and a failed delivery is retried after its backoff (`FLUSH_BACKOFF_MAX_MS`), not after the interval.",
    schema: integer(10, 3_600_000),
  }),
  upstreamCompression: define({
    env: 'UPSTREAM_COMPRESSION',
    default: 'gzip',
    doc: "`gzip`, `deflate` or `br` (Brotli, quality 5): batches go compressed with it, in the series form where the upstream takes that, once the upstream's answers say it takes them (a Harbor gateway's do; the first batch goes as plain JSON). An upstream that answers 415 to one gets it again as plain JSON, and plain JSON until the gateway restarts. `off`: plain JSON batches always, the API's own form.",
    schema: z.enum(['gzip', 'deflate', 'br', 'off']),
  }),
  upstreamOrder: define({
    env: 'UPSTREAM_ORDER',
    default: 'oldest_first',
    doc: '`oldest_first`: the upstream sink sends a backlog in the order it was answered. `current_first`: with more than a batch behind (after an outage), it sends the newest batch first, then what arrives meanwhile, and backfills the rest behind it: the centre is current within one delivery of the link returning; every reading still arrives once (docs/fleet.md). Not while the catalogue thins readings, which is decided in queue order.',
    schema: sinkOrder,
  }),
  upstreamMaxBytesPerS: define({
    env: 'UPSTREAM_MAX_BYTES_PER_S',
    default: '0',
    doc: "The upstream sink's bandwidth budget: at most this many bytes of readings a second on average (their bytes as queued, which every encoding sends; its own framing or compression comes on top), in bursts of one batch; `0`: no budget. `/status` shows it with the backlog's expected catch-up time.",
    schema: byteSize(0, 1024 * 1024 * 1024),
  }),
  upstreamCheapHours: define({
    env: 'UPSTREAM_CHEAP_HOURS',
    default: undefined,
    doc: "Times of day when the upstream link costs less, on the gateway's clock (its time zone): `22:00-06:00`, or several `00:00-06:00,12:00-13:00`. Within them `UPSTREAM_MAX_BYTES_PER_S` does not apply (a backlog catches up at the link's speed); a wait for the budget ends when they begin, and the budget starts afresh after them. Unset: the budget applies at all hours. Refused without `UPSTREAM_MAX_BYTES_PER_S`.",
    schema: dailyWindows,
  }),
  kafkaBrokers: define({
    env: 'KAFKA_BROKERS',
    default: undefined,
    doc: 'Kafka sink: comma-separated `host:port` of the brokers to bootstrap from. Unset, the gateway forwards nothing to Kafka. Each reading becomes one JSON message `{"time", "ship_id", "cargo_id", "value"}` (time in RFC 3339 with nanoseconds) keyed by `ship_id`, sent by an idempotent producer with `acks=all`.',
    schema: z
      .string()
      .transform((value) => value.split(',').map((broker) => broker.trim()))
      .pipe(
        z.array(z.string().regex(/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/, 'must be host:port, comma-separated')).min(1),
      ),
  }),
  kafkaTopic: define({
    env: 'KAFKA_TOPIC',
    default: 'cargo_data',
    doc: "Kafka sink: the topic the readings go to. It must exist: the gateway does not create topics (their partitions and retention are the cluster owner's choice).",
    schema: z.string().regex(/^[A-Za-z0-9._-]{1,249}$/, 'must be a Kafka topic name (letters, digits, `.`, `_`, `-`, up to 249)'),
  }),
  kafkaClientId: define({
    env: 'KAFKA_CLIENT_ID',
    default: undefined,
    doc: 'Kafka sink: the client id brokers see in their logs, metrics and quotas; `harbor-gateway-` and `GATEWAY_NAME` (or the host name) when unset.',
    schema: z.string().regex(/^[A-Za-z0-9._-]{1,255}$/, 'must be letters, digits, `.`, `_` or `-`'),
  }),
  kafkaTls: define({
    env: 'KAFKA_TLS',
    default: 'off',
    doc: 'Kafka sink: `on` for TLS to the brokers, verified against the system CAs or `KAFKA_TLS_CA_FILE`.',
    schema: boolean,
  }),
  kafkaTlsCaFile: define({
    env: 'KAFKA_TLS_CA_FILE',
    default: undefined,
    doc: "Kafka sink: PEM file of the CA(s) that signed the brokers' certificates, for a private CA (implies `KAFKA_TLS`).",
    schema: text(),
  }),
  kafkaSaslMechanism: define({
    env: 'KAFKA_SASL_MECHANISM',
    default: undefined,
    doc: 'Kafka sink: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`, with `KAFKA_SASL_USERNAME` and the password. Unset, no SASL. PLAIN sends the password itself: use it only with `KAFKA_TLS`.',
    schema: z
      .string()
      .trim()
      .toUpperCase()
      .pipe(z.enum(['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'], 'must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512')),
  }),
  kafkaSaslUsername: define({
    env: 'KAFKA_SASL_USERNAME',
    default: undefined,
    doc: 'Kafka sink: the SASL user name.',
    schema: text(255),
  }),
  kafkaSaslPassword: define({
    env: 'KAFKA_SASL_PASSWORD',
    default: undefined,
    doc: 'Kafka sink: the SASL password. Prefer `KAFKA_SASL_PASSWORD_FILE` or a systemd credential named `kafka_sasl_password`.',
    schema: text(),
    secret: true,
  }),
  kafkaSaslPasswordFile: define({
    env: 'KAFKA_SASL_PASSWORD_FILE',
    default: undefined,
    doc: 'Kafka sink: file holding the SASL password. `$CREDENTIALS_DIRECTORY/kafka_sasl_password` is read automatically under systemd.',
    schema: text(),
  }),
  kafkaTimeoutMs: define({
    env: 'KAFKA_TIMEOUT_MS',
    default: '30000',
    doc: "Kafka sink: how long one send may take, the producer's own retries included, before the batch counts as failed and is sent again after a backoff.",
    schema: integer(1000, 600_000),
  }),
  kafkaPolicy: define({
    env: 'KAFKA_POLICY',
    default: 'drop_oldest',
    doc: 'Kafka sink: when the queue is full because Kafka is far behind (a long uplink outage), `drop_oldest` skips its oldest readings, counted and logged, so the site keeps taking readings and the local QuestDB keeps everything; `block` refuses new readings (503) until Kafka catches up.',
    schema: sinkPolicy,
  }),
  kafkaBackfill: define({
    env: 'KAFKA_BACKFILL',
    default: 'off',
    doc: 'Kafka sink: `off`: a Kafka sink added to a running site starts at the newest reading. `on`: it starts with the oldest reading still queued.',
    schema: boolean,
  }),
  kafkaBatchReadings: define({
    env: 'KAFKA_BATCH_READINGS',
    default: '20000',
    doc: 'Kafka sink: most readings taken off the queue in one delivery (sent in requests of at most 64 KiB of messages).',
    schema: integer(1, 1_000_000),
  }),
  kafkaFlushIntervalMs: define({
    env: 'KAFKA_FLUSH_INTERVAL_MS',
    default: undefined,
    doc: 'Kafka sink: how often it sends what queued since its last delivery, as `UPSTREAM_FLUSH_INTERVAL_MS`. Unset: `FLUSH_INTERVAL_MS`.',
    schema: integer(10, 3_600_000),
  }),
  kafkaCompression: define({
    env: 'KAFKA_COMPRESSION',
    default: 'gzip',
    doc: "Kafka sink: the codec of each record batch, which every Kafka broker and consumer undoes: `gzip` (Node's zlib), `snappy` or `lz4` (the Kafka client's native modules: less CPU than gzip, more bytes), `off` for none. zstd needs Node 22.15 or later, which the gateway does not require. A topic whose `compression.type` names another codec has the broker compress again with that.",
    schema: z.enum(['gzip', 'snappy', 'lz4', 'off']),
  }),
  kafkaOrder: define({
    env: 'KAFKA_ORDER',
    default: 'oldest_first',
    doc: 'Kafka sink: `oldest_first` sends a backlog in queue order; `current_first` sends the newest batch first after an outage and backfills behind it, as `UPSTREAM_ORDER`.',
    schema: sinkOrder,
  }),
  kafkaMaxBytesPerS: define({
    env: 'KAFKA_MAX_BYTES_PER_S',
    default: '0',
    doc: 'Kafka sink: its bandwidth budget, as `UPSTREAM_MAX_BYTES_PER_S`; `0`: no budget.',
    schema: byteSize(0, 1024 * 1024 * 1024),
  }),
  kafkaCheapHours: define({
    env: 'KAFKA_CHEAP_HOURS',
    default: undefined,
    doc: 'Kafka sink: times of day without its bandwidth budget, as `UPSTREAM_CHEAP_HOURS`.',
    schema: dailyWindows,
  }),
  mqtt: define({
    env: 'MQTT',
    default: 'off',
    doc: '`on`: devices may publish readings over MQTT 3.1.1 or 5 on `MQTT_PORT` and `MQTT_TLS_PORT` (see docs/mqtt.md), authenticated by their device keys; a QoS 1 publish is acknowledged only after its readings are committed to the queue. `off`: no MQTT listener, and the MQTT code is never loaded.',
    schema: boolean,
  }),
  mqttPort: define({
    env: 'MQTT_PORT',
    default: '1883',
    doc: 'MQTT port (with `MQTT=on`). It also answers TLS, told apart by the first byte as `PORT` does. 0 picks a free port.',
    schema: integer(0, 65535),
  }),
  mqttTlsPort: define({
    env: 'MQTT_TLS_PORT',
    default: '8883',
    doc: "MQTT over TLS (with `MQTT=on`), with the gateway's HTTPS certificate. 0 picks a free port.",
    schema: integer(0, 65535),
  }),
  mqttAnonymous: define({
    env: 'MQTT_ANONYMOUS',
    default: 'off',
    doc: '`on` lets MQTT clients without a password publish, as the key named `anonymous` (every ship allowed). Off by default: the password must be a device key.',
    schema: boolean,
  }),
  mqttMaxPacketBytes: define({
    env: 'MQTT_MAX_PACKET_BYTES',
    default: '1MiB',
    doc: 'Largest MQTT packet accepted (topic and payload included); a client that announces a larger one is disconnected before it is read (MQTT 5: reason 0x95).',
    schema: byteSize(1024, 64 * 1024 * 1024),
  }),
  mqttMaxInflight: define({
    env: 'MQTT_MAX_INFLIGHT',
    default: '64',
    doc: 'QoS 1 and 2 publishes one client may have waiting for their acknowledgement. MQTT 5 clients are told (Receive Maximum); beyond it the gateway stops reading from an MQTT 3.1.1 client until its acknowledgements went out.',
    schema: integer(1, 65535),
  }),
  mqttKeepAliveMaxS: define({
    env: 'MQTT_KEEP_ALIVE_MAX_S',
    default: '300',
    doc: 'Longest MQTT keep-alive granted, in seconds. A client silent for 1.5 times its keep-alive (this one when it asks for more, or for none) is disconnected.',
    schema: integer(5, 65535),
  }),
  mqttSubscribeUrl: define({
    env: 'MQTT_SUBSCRIBE_URL',
    default: undefined,
    doc: 'A site broker the gateway subscribes to, `mqtt://host:1883` or `mqtts://host:8883` (credentials not in the URL). Messages become readings as `MQTT_SUBSCRIBE_PRESET` or the `MQTT_SUBSCRIBE_SHIP`, `_CARGO` and `_TIME` mappings say; each is acknowledged to the broker only after its readings are committed (QoS 1, persistent session). Unset: no subscription.',
    schema: z
      .string()
      .trim()
      .refine((value) => {
        try {
          const url = new URL(value);
          return (
            (url.protocol === 'mqtt:' || url.protocol === 'mqtts:') && url.username === '' && url.password === '' && url.hostname !== ''
          );
        } catch {
          return false;
        }
      }, 'must be mqtt://host:port or mqtts://host:port without credentials (use MQTT_SUBSCRIBE_USERNAME and MQTT_SUBSCRIBE_PASSWORD_FILE)'),
  }),
  mqttSubscribePreset: define({
    env: 'MQTT_SUBSCRIBE_PRESET',
    default: undefined,
    doc: 'Topic filters and mapping of a known source: `zigbee2mqtt`, `tasmota`, `esphome` or `shelly` (Gen2); see docs/mqtt.md for their payloads. The `MQTT_SUBSCRIBE_TOPICS`, `_SHIP`, `_CARGO` and `_TIME` settings override its parts.',
    schema: z.enum(['zigbee2mqtt', 'tasmota', 'esphome', 'shelly']),
  }),
  mqttSubscribeTopics: define({
    env: 'MQTT_SUBSCRIBE_TOPICS',
    default: undefined,
    doc: 'Comma-separated topic filters to subscribe to (`+` and `#` wildcards), e.g. `sensors/+/data`.',
    schema: z
      .string()
      .transform((value) => value.split(',').map((topic) => topic.trim()))
      .pipe(
        z
          .array(
            z
              .string()
              .min(1, 'must not hold an empty filter')
              .max(1024)
              .refine(isTopicFilter, 'must be MQTT topic filters (`+` a whole level, `#` only as the last level)'),
          )
          .min(1),
      ),
  }),
  mqttSubscribeShip: define({
    env: 'MQTT_SUBSCRIBE_SHIP',
    default: undefined,
    doc: "Where a message's ship_id comes from: `topic:N` (level N of the topic, from 0) or `field:NAME` (a JSON field, `a.b` for nested).",
    schema: z
      .string()
      .trim()
      .regex(/^(topic:\d{1,3}|field:[^\s]{1,200})$/, 'must be topic:N or field:NAME'),
  }),
  mqttSubscribeCargo: define({
    env: 'MQTT_SUBSCRIBE_CARGO',
    default: undefined,
    doc: '`fields` (default): every numeric field of a JSON payload is a reading, its cargo_id the field name (nested fields joined with `.`, numeric strings counted, as for TTN); `topic:N`: level N of the topic is the cargo_id and the payload one number (or `{"value":…}`).',
    schema: z
      .string()
      .trim()
      .regex(/^(fields|topic:\d{1,3})$/, 'must be fields or topic:N'),
  }),
  mqttSubscribeTime: define({
    env: 'MQTT_SUBSCRIBE_TIME',
    default: undefined,
    doc: "A reading's time: `receive` (default: when the gateway received the message) or `field:NAME`, a JSON field holding an ISO 8601 time (the receive time where it is missing).",
    schema: z
      .string()
      .trim()
      .regex(/^(receive|field:[^\s]{1,200})$/, 'must be receive or field:NAME'),
  }),
  mqttSubscribeClientId: define({
    env: 'MQTT_SUBSCRIBE_CLIENT_ID',
    default: undefined,
    doc: "The client id the gateway's persistent session is kept under by the broker; `harbor-gateway-` and `GATEWAY_NAME` (or the host name) when unset. Keep it stable: a new id starts a new session, and what the broker kept for the old one is not delivered.",
    schema: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, 'must be 1-128 letters, digits, `.`, `_` or `-`'),
  }),
  mqttSubscribeUsername: define({
    env: 'MQTT_SUBSCRIBE_USERNAME',
    default: undefined,
    doc: 'User name at the site broker.',
    schema: text(255),
  }),
  mqttSubscribePassword: define({
    env: 'MQTT_SUBSCRIBE_PASSWORD',
    default: undefined,
    doc: 'Password at the site broker. Refused in production: use `MQTT_SUBSCRIBE_PASSWORD_FILE` or a systemd credential named `mqtt_subscribe_password`.',
    schema: text(),
    secret: true,
  }),
  mqttSubscribePasswordFile: define({
    env: 'MQTT_SUBSCRIBE_PASSWORD_FILE',
    default: undefined,
    doc: 'File holding the site broker password. `$CREDENTIALS_DIRECTORY/mqtt_subscribe_password` is read automatically under systemd.',
    schema: text(),
  }),
  mqttSubscribeCaFile: define({
    env: 'MQTT_SUBSCRIBE_CA_FILE',
    default: undefined,
    doc: "PEM certificate(s) the site broker's certificate (`mqtts://`) must chain to; unset: the system's CA bundle.",
    schema: text(),
  }),
} as const;

export type SettingValues = {
  -readonly [K in keyof typeof SETTINGS]: (typeof SETTINGS)[K] extends Setting<infer T> ? T : never;
};
