import { parseDocument } from 'yaml';
import * as z from 'zod';

/**
 * The site's catalogue: what its ship and cargo ids mean, for the dashboards and alerts. One YAML
 * file the site edits (`CATALOGUE_FILE`); `systemd/catalogue.yaml` is the annotated sample.
 *
 *   ships:
 *     ship-007: MV Nordlicht
 *   cargo:
 *     - match: reefer4_temp
 *       name: Reefer 4 temperature
 *       unit: °C
 *       min: 2
 *       max: 8
 *       decimals: 1
 *     - match: temp*
 *       name: Temperature
 *       unit: °C
 */
export interface Catalogue {
  /** Display names by exact ship id. */
  ships: Map<string, string>;
  /** In the file's order: the first entry whose pattern matches a cargo id applies. */
  cargo: CargoEntry[];
}

export interface CargoEntry {
  /** An id, or a pattern with one `*` standing for any characters: `temp*`, `*_temp`, `reefer*_temp`. */
  match: string;
  name?: string | undefined;
  unit?: string | undefined;
  /** The normal range: a reading below `min` or above `max` is out of range (coloured, and alerted). */
  min?: number | undefined;
  max?: number | undefined;
  /** Decimals shown. */
  decimals?: number | undefined;
}

export const EMPTY_CATALOGUE: Catalogue = { ships: new Map(), cargo: [] };

/** Longest id a pattern can name: the gateway's own bound on ids (MAX_ID_LENGTH) is at most this. */
const MAX_ID = 1024;
/** Printable text on one line: it becomes a label on a panel and in an alert. */
const label = (max: number) =>
  z
    .string()
    .trim()
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`)
    .refine((text) => !/[\p{Cc}\p{Cf}]/u.test(text), 'must be one line of printable text');

const cargoEntrySchema = z
  .strictObject({
    match: label(MAX_ID).refine((p) => p.split('*').length <= 2, 'may hold one * at most (temp*, *_temp, reefer*_temp)'),
    name: label(100).optional(),
    unit: label(20).optional(),
    min: z.number('must be a number').optional(),
    max: z.number('must be a number').optional(),
    decimals: z.number('must be a whole number').int('must be a whole number').min(0).max(6, 'must be at most 6').optional(),
  })
  .refine((e) => e.min === undefined || e.max === undefined || e.min <= e.max, { message: 'min must not be above max', path: ['max'] });

const catalogueSchema = z.strictObject({
  ships: z.record(label(MAX_ID), label(100), 'must map ship ids to names (ship-007: MV Nordlicht)').optional(),
  cargo: z.array(cargoEntrySchema, 'must be a list of entries, each starting with "- match:"').max(1000).optional(),
});

export class CatalogueError extends Error {
  override name = 'CatalogueError';
  constructor(readonly problems: string[]) {
    super(`catalogue file: ${problems.join('; ')}`);
  }
}

/** Parses and checks the catalogue file's text; throws CatalogueError naming every problem and where it is. */
export function parseCatalogue(text: string): Catalogue {
  const document = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (document.errors.length > 0) throw new CatalogueError(document.errors.map((e) => e.message.split('\n')[0] ?? e.message));
  const parsed = catalogueSchema.safeParse(document.toJS() ?? {});
  if (!parsed.success) throw new CatalogueError(parsed.error.issues.map((issue) => `${where(issue.path)}: ${issue.message}`));
  return { ships: new Map(Object.entries(parsed.data.ships ?? {})), cargo: parsed.data.cargo ?? [] };
}

/** `cargo[2].max` as a site manager counts: "cargo entry 3, max". */
function where(path: readonly PropertyKey[]): string {
  if (path.length === 0) return 'the file';
  const [section, index, ...rest] = path;
  if (section === 'cargo' && typeof index === 'number') return [`cargo entry ${index + 1}`, ...rest.map(String)].join(', ');
  if (section === 'ships' && index !== undefined) return `ships, ${String(index)}`;
  return path.map(String).join(', ');
}

/** A cargo pattern as the SQL of the dashboards matches it, case-insensitively. */
export interface CargoPattern {
  prefix: string;
  suffix: string;
  minLength: number;
  maxLength: number;
}

/** `reefer*_temp` → prefix `reefer`, suffix `_temp`, at least 11 characters; an id without `*` is itself. */
export function cargoPattern(match: string): CargoPattern {
  const star = match.indexOf('*');
  if (star === -1) return { prefix: match.toLowerCase(), suffix: '', minLength: match.length, maxLength: match.length };
  const prefix = match.slice(0, star).toLowerCase();
  const suffix = match.slice(star + 1).toLowerCase();
  return { prefix, suffix, minLength: prefix.length + suffix.length, maxLength: MAX_ID };
}

/** Whether a cargo id matches an entry's pattern: the same test the dashboards' SQL makes. */
export function matchesCargo(pattern: CargoPattern, id: string): boolean {
  const lower = id.toLowerCase();
  return (
    id.length >= pattern.minLength && id.length <= pattern.maxLength && lower.startsWith(pattern.prefix) && lower.endsWith(pattern.suffix)
  );
}

/** The entry that applies to a cargo id: the first that matches. */
export function cargoEntryFor(catalogue: Catalogue, id: string): CargoEntry | undefined {
  return catalogue.cargo.find((entry) => matchesCargo(cargoPattern(entry.match), id));
}
