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
 *   thinning:
 *     - match: reefer*_temp
 *       deadband: 0.2
 *       max_interval_minutes: 15
 *     - match: pump_rpm
 *       summary_seconds: 60
 */
export interface Catalogue {
  /** Display names by exact ship id. */
  ships: Map<string, string>;
  /** In the file's order: the first entry whose pattern matches a cargo id applies. */
  cargo: CargoEntry[];
  /**
   * What the sinks towards the centre send of a cargo id (the local QuestDB keeps every reading):
   * the first rule whose pattern matches applies; an id no rule matches is sent whole.
   */
  thinning: ThinningEntry[];
}

/** A deadband or a summary per interval, in the form the sinks take it (sinks/thinning/thinning-rules.ts). */
export type ThinningEntry =
  | { match: string; deadband: number; maxIntervalMs?: number | undefined }
  | { match: string; summaryMs: number; latenessMs: number };

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

export const EMPTY_CATALOGUE: Catalogue = { ships: new Map(), cargo: [], thinning: [] };

/** Longest id a pattern can name: the gateway's own bound on ids (MAX_ID_LENGTH) is at most this. */
export const MAX_ID = 1024;

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
