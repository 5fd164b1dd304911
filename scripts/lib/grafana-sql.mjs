// The SQL the dashboards and alert rules share, in QuestDB's dialect, as Grafana's PostgreSQL data
// source sends it: the catalogue's meaning of cargo ids, ship names, which ids are positions and
// radio fields rather than cargo, the ships-seen window, the gateways' last reports.
// scripts/grafana-provisioning.mjs writes it into grafana/provisioning/.

/**
 * The window of "ships seen": the ship list, ships at a glance and the silent-ship alert. The
 * comment marks it for start-grafana.sh, which puts SHIPS_SEEN_DAYS in its place.
 */
export const SHIPS_SEEN = "dateadd('d', -30 /* SHIPS_SEEN_DAYS */, now())";
/** "Reporting now": a reading within this many minutes, as the silent-ship alert counts it. */
export const REPORTING_MINUTES = 10;

/**
 * Filters by the dashboard's variables in the form All (`''`) passes: QuestDB folds the constant
 * half away, and an empty list never becomes `IN ()`. Under All the site filter also keeps the
 * readings stored before sites existed (a NULL site), which no picked site matches.
 */
export const SITE_FILTER = "('' IN ($site) OR site IN ($site))";
/** The selected ships: ship ids repeat from site to site, so a ship is selected by its site as well. */
export const SHIP_FILTER = `${SITE_FILTER} AND ('' IN ($ship) OR ship_id IN ($ship))`;
export const CARGO_FILTER = "('' IN ($cargo) OR cargo_id IN ($cargo))";

/** Position fields: latitude and longitude in every naming the map pairs, altitude, satellites. */
const POSITION_NAMES = '(.*_)?(latitude|lat|longitude|long|lon|lng|altitude|alt|satellites|sats)';
/** The radio link fields of a TTN uplink. */
const LINK_NAMES = 'rssi|channel_rssi|snr|frequency|bandwidth|spreading_factor';
export const LATITUDE_IDS = '(?i)^(.*_)?(latitude|lat)$';
export const LONGITUDE_IDS = '(?i)^(.*_)?(longitude|long|lon|lng)$';
/** Cargo is every id that is neither a position nor a radio field. */
export const IS_CARGO = `cargo_id !~ '(?i)^(${POSITION_NAMES}|${LINK_NAMES})$'`;

/** The newest version of a catalogue table: every row stamped with the newest time. */
const newestVersion = (/** @type {string} */ table) =>
  `${table} c JOIN (SELECT max(time) AS version FROM ${table}) v ON c.time = v.version`;

/**
 * `ship_names`: display names by site and ship id, from the newest catalogue of each site. Ship
 * ids repeat from site to site, so a catalogue names its own site's ships only; join on both,
 * `ON s.site = n.site AND s.ship_id = n.ship_id` (QuestDB's joins match a null site with a null
 * site: readings stored before sites existed keep the names of a catalogue of that time).
 */
export const SHIP_NAMES = `ship_names AS (
  SELECT c.site, c.ship_id, c.name
  FROM ship_catalogue c JOIN (SELECT site, max(time) AS version FROM ship_catalogue) v ON c.site = v.site AND c.time = v.version
  WHERE c.ship_id IS NOT NULL
)`;

/** Joins `ship_names` as `n` to the rows of `alias`. */
export const joinShipNames = (/** @type {string} */ alias) =>
  `LEFT JOIN ship_names n ON ${alias}.site = n.site AND ${alias}.ship_id = n.ship_id`;

/** A row's site as the panels show it: empty for readings stored before sites existed. */
export const siteOf = (/** @type {string} */ alias) => `coalesce(${alias}.site, '') AS site`;

/**
 * The rows of `source` (a subquery with a `site` column and one row per site and `key`), less
 * those without a site whose `key` also has rows of a site: readings stored before sites existed
 * are the same ship or series as the site's readings since, which speak for it. Without this, a
 * table upgraded in place would show each ship twice, one of them silent since the upgrade.
 * @param {string} source @param {string[]} columns @param {string} key
 */
export const withoutPresiteTwins = (source, columns, key) => `SELECT ${columns.join(', ')} FROM (
    SELECT ${columns.join(', ')}, count(site) OVER (PARTITION BY ${key}) AS sited FROM ${source}
  ) WHERE site IS NOT NULL OR sited = 0`;

/**
 * `label` with its site, `label (site)`, when the rows of `source` (with `site` and `label`
 * columns) hold more than one site: a chart's lines of two sites' ship-1 stay apart, and a single
 * site's are not cluttered. Each row keeps `columns`, and `label`.
 * @param {string} source @param {string[]} columns
 */
export const labelledBySite = (source, columns) => `SELECT ${columns.join(', ')},
    CASE WHEN max(site_rank) OVER () > 1 THEN concat(label, ' (', coalesce(site, 'no site'), ')') ELSE label END AS label
  FROM (SELECT ${columns.join(', ')}, site, label, dense_rank() OVER (ORDER BY site) AS site_rank FROM ${source})`;

/** `catalogue`: the entries of the newest version of the cargo catalogue. */
export const CATALOGUE = `catalogue AS (
  SELECT c.position, c.prefix, c.suffix, c.min_length, c.max_length, c.name, c.unit, c.normal_min, c.normal_max, c.decimals
  FROM ${newestVersion('cargo_catalogue')}
  WHERE c.position > 0
)`;

/** The catalogue entries that match the cargo id `id` (an SQL expression), as `c`. */
export const matchesId = (/** @type {string} */ id) => `length(${id}) BETWEEN c.min_length AND c.max_length
    AND lower(left(${id}, length(c.prefix))) = c.prefix AND lower(right(${id}, length(c.suffix))) = c.suffix`;

/**
 * `named`: each row of `source` (a CTE with a `cargo_id` column; its `columns` are kept) with the
 * catalogue entry of its cargo id, the first that matches: `cargo` (the name, with the id when a
 * pattern matched it; the id itself when no entry does), `unit`, `normal_min`, `normal_max`,
 * `decimals`. QuestDB matches no pattern taken from a column, so the gateway writes each pattern as
 * prefix, suffix and length (src/catalogue/catalogue-tables.ts). One pass over `source`, joined to
 * the catalogue's few rows: QuestDB runs a CTE again wherever it is named, and `source` is the
 * expensive part.
 * @param {string} source
 * @param {string[]} columns
 * @param {string} key  the columns that tell the rows of `source` apart
 */
export const named = (source, columns, key = 'site, ship_id, cargo_id') => `${CATALOGUE}, matched AS (
  SELECT ${columns.map((c) => `l.${c}`).join(', ')},
    CASE WHEN c.name IS NULL THEN l.cargo_id WHEN c.min_length = c.max_length THEN c.name ELSE concat(c.name, ' (', l.cargo_id, ')') END AS cargo,
    c.unit, c.normal_min, c.normal_max, c.decimals,
    row_number() OVER (PARTITION BY ${key
      .split(', ')
      .map((k) => `l.${k}`)
      .join(', ')} ORDER BY c.position) AS pick
  FROM ${source} l LEFT JOIN catalogue c ON ${matchesId('l.cargo_id')}
), named AS (
  SELECT ${columns.join(', ')}, cargo, unit, normal_min, normal_max, decimals FROM matched WHERE pick = 1
)`;

/** A number as a site manager writes it: 8, not 8.0. */
const number = (/** @type {string} */ x) =>
  `CASE WHEN ${x} = cast(${x} AS long) THEN cast(cast(${x} AS long) AS string) ELSE cast(${x} AS string) END`;

/** `above`, `below`, `normal`, or `no range` where the catalogue gives none (`m` is a row of `named`). */
export const cargoState = (
  /** @type {string} */ value,
) => `CASE WHEN ${value} > m.normal_max THEN 'above' WHEN ${value} < m.normal_min THEN 'below'
    WHEN m.normal_min IS NULL AND m.normal_max IS NULL THEN 'no range' ELSE 'normal' END`;

/** The normal range in words: `2 to 8 °C`, `above 2 °C`, `below 8 °C`; empty without one. */
export const normalRange = `CASE
    WHEN m.normal_min IS NOT NULL AND m.normal_max IS NOT NULL THEN concat(${number('m.normal_min')}, ' to ', ${number('m.normal_max')}, ' ', coalesce(m.unit, ''))
    WHEN m.normal_min IS NOT NULL THEN concat('above ', ${number('m.normal_min')}, ' ', coalesce(m.unit, ''))
    WHEN m.normal_max IS NOT NULL THEN concat('below ', ${number('m.normal_max')}, ' ', coalesce(m.unit, ''))
    ELSE '' END`;

/** The limit a reading crossed, in words, for the alert: `above 8 °C`. */
export const crossedLimit = `CASE
    WHEN m.value > m.normal_max THEN concat('above ', ${number('m.normal_max')}, ' ', coalesce(m.unit, ''))
    WHEN m.value < m.normal_min THEN concat('below ', ${number('m.normal_min')}, ' ', coalesce(m.unit, ''))
    ELSE concat('within ', ${normalRange.replace(/\n {4}/g, '\n      ')}) END`;

/** What tells series apart: a site, a ship and a cargo id (ship ids repeat from site to site). */
export const SERIES = ['site', 'ship_id', 'cargo_id'];

/**
 * The latest row of each series (`keys`, the site first) where `where` holds (a filter on time and
 * ship keeps LATEST ON fast), without the twins of readings stored before sites existed.
 */
export const latestOf = (/** @type {string} */ where, keys = SERIES, columns = ['value']) =>
  withoutPresiteTwins(
    `(
    SELECT ${['time', ...keys, ...columns].join(', ')} FROM cargo_data
    WHERE ${where}
    LATEST ON time PARTITION BY ${keys.join(', ')}
  )`,
    ['time', ...keys, ...columns],
    keys.filter((k) => k !== 'site').join(', '),
  );

/** `recent`: the latest reading of each series where `where` holds. */
export const latestReadings = (/** @type {string} */ where, keys = SERIES) => `recent AS (
  ${latestOf(where, keys)}
)`;

/**
 * `named`: the latest reading of each ship and id where `where` holds, named by the catalogue;
 * `CARGO_ONLY` keeps the cargo among them. It filters `named`, never `recent`: QuestDB would push
 * the filter into LATEST ON, which would then look through the whole range for the positions and
 * radio fields it can never find. Each row keeps its `keys`.
 */
export const cargoNow = (/** @type {string} */ where, keys = SERIES) =>
  `${latestReadings(where, keys)}, ${named('recent', ['time', ...keys, 'value'], keys.join(', '))}`;
export const CARGO_ONLY = IS_CARGO.replace('cargo_id', 'm.cargo_id');

/**
 * `last`: each gateway's last word, a health row or an event, whichever is newer; a gateway whose
 * last word is `retired` (renamed, or retired by hand) is left out. Events have no TTL, so a
 * gateway silent for longer than the health rows' 30 days is still here.
 */
export const GATEWAY_LAST_WORD = `words AS (
  SELECT time, gateway, 'report' AS kind, state, state_text AS text FROM gateway_health LATEST ON time PARTITION BY gateway
  UNION ALL
  SELECT time, gateway, event AS kind, event AS state, text FROM gateway_events LATEST ON time PARTITION BY gateway
), last AS (
  SELECT time, gateway, kind, state, text FROM (words ORDER BY time) timestamp(time)
  LATEST ON time PARTITION BY gateway
)`;
