import { escapeIlp, ilpString as text } from '../questdb/ilp-escape.js';
import { cargoPattern, type Catalogue } from './catalogue.js';

export const CARGO_CATALOGUE_TABLE = 'cargo_catalogue';
export const SHIP_CATALOGUE_TABLE = 'ship_catalogue';

export interface CatalogueTables {
  cargo: string;
  ships: string;
}

export const CATALOGUE_TABLES: CatalogueTables = { cargo: CARGO_CATALOGUE_TABLE, ships: SHIP_CATALOGUE_TABLE };

/**
 * Each publication of the catalogue is a version: its rows share one `time`, and the dashboards
 * read the newest (`max(time)`). Position 0 is the version's marker row, so an emptied catalogue
 * is a version too. Entries match a cargo id by prefix, suffix and length (QuestDB matches no
 * pattern taken from a column), lower-cased, position 1 first. Old versions leave with the TTL.
 */
export const createCatalogueTables = (tables: CatalogueTables = CATALOGUE_TABLES): string[] => [
  `CREATE TABLE IF NOT EXISTS ${tables.cargo} (
  time TIMESTAMP, gateway SYMBOL, position INT, pattern VARCHAR, prefix VARCHAR, suffix VARCHAR, min_length INT, max_length INT,
  name VARCHAR, unit VARCHAR, normal_min DOUBLE, normal_max DOUBLE, decimals INT
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`,
  `CREATE TABLE IF NOT EXISTS ${tables.ships} (
  time TIMESTAMP, gateway SYMBOL, site SYMBOL, ship_id VARCHAR, name VARCHAR
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`,
  // Ship ids repeat from site to site: a name is the writing gateway's site's (tables of before sites gain the column).
  `ALTER TABLE ${tables.ships} ADD COLUMN IF NOT EXISTS site SYMBOL`,
];

/** One version of the catalogue as ILP lines, stamped `version` (epoch ms); its ship names are `site`'s. */
export function encodeCatalogue(
  catalogue: Catalogue,
  gateway: string,
  site: string,
  version: number,
  tables: CatalogueTables = CATALOGUE_TABLES,
): Buffer {
  const at = `${version}000000n`;
  const tag = `gateway=${escapeIlp(gateway)}`;
  const shipTags = `${tag},site=${escapeIlp(site)}`;
  const lines = [`${tables.cargo},${tag} position=0i ${at}`, `${tables.ships},${shipTags} name="" ${at}`];
  catalogue.cargo.forEach((entry, index) => {
    const pattern = cargoPattern(entry.match);
    const columns = [
      `position=${index + 1}i`,
      `pattern=${text(entry.match)}`,
      `prefix=${text(pattern.prefix)}`,
      `suffix=${text(pattern.suffix)}`,
      `min_length=${pattern.minLength}i`,
      `max_length=${pattern.maxLength}i`,
    ];
    if (entry.name !== undefined) columns.push(`name=${text(entry.name)}`);
    if (entry.unit !== undefined) columns.push(`unit=${text(entry.unit)}`);
    if (entry.min !== undefined) columns.push(`normal_min=${entry.min}`);
    if (entry.max !== undefined) columns.push(`normal_max=${entry.max}`);
    if (entry.decimals !== undefined) columns.push(`decimals=${entry.decimals}i`);
    lines.push(`${tables.cargo},${tag} ${columns.join(',')} ${at}`);
  });
  for (const [ship, name] of catalogue.ships) lines.push(`${tables.ships},${shipTags} ship_id=${text(ship)},name=${text(name)} ${at}`);
  return Buffer.from(`${lines.join('\n')}\n`);
}
