import { parseDocument } from 'yaml';
import * as z from 'zod';
import { type Catalogue, MAX_ID, type ThinningEntry } from './catalogue.js';

// The catalogue file's parser, loaded only when there is a file to parse: yaml and the schema are
// memory a gateway without a catalogue does not hold.

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

const matchSchema = label(MAX_ID).refine((p) => p.split('*').length <= 2, 'may hold one * at most (temp*, *_temp, reefer*_temp)');

/** A day at most: a summary interval or lateness longer than that would hold readings back for days. */
const DAY_S = 86_400;

const thinningEntrySchema = z.union(
  [
    z
      .strictObject({
        match: matchSchema,
        deadband: z.number('must be a number').min(0, 'must not be negative').max(Number.MAX_VALUE, 'must be a finite number'),
        max_interval_minutes: z
          .number('must be a number')
          .positive('must be above 0')
          .max(7 * 24 * 60, 'must be at most a week')
          .optional(),
      })
      .transform((e): ThinningEntry => ({ match: e.match, deadband: e.deadband, maxIntervalMs: minutesMs(e.max_interval_minutes) })),
    z
      .strictObject({
        match: matchSchema,
        summary_seconds: z.number('must be a whole number').int('must be a whole number').min(1).max(DAY_S, 'must be at most a day'),
        lateness_seconds: z
          .number('must be a whole number')
          .int('must be a whole number')
          .min(0)
          .max(DAY_S, 'must be at most a day')
          .optional(),
      })
      .transform(
        (e): ThinningEntry => ({ match: e.match, summaryMs: e.summary_seconds * 1000, latenessMs: (e.lateness_seconds ?? 0) * 1000 }),
      ),
  ],
  'must be a deadband (match, deadband, max_interval_minutes) or a summary (match, summary_seconds, lateness_seconds)',
);

const minutesMs = (minutes: number | undefined): number | undefined => (minutes === undefined ? undefined : Math.round(minutes * 60_000));

const catalogueSchema = z.strictObject({
  ships: z.record(label(MAX_ID), label(100), 'must map ship ids to names (ship-007: MV Nordlicht)').optional(),
  cargo: z.array(cargoEntrySchema, 'must be a list of entries, each starting with "- match:"').max(1000).optional(),
  thinning: z.array(thinningEntrySchema, 'must be a list of rules, each starting with "- match:"').max(1000).optional(),
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
  return { ships: new Map(Object.entries(parsed.data.ships ?? {})), cargo: parsed.data.cargo ?? [], thinning: parsed.data.thinning ?? [] };
}

/** `cargo[2].max` as a site manager counts: "cargo entry 3, max". */
function where(path: readonly PropertyKey[]): string {
  if (path.length === 0) return 'the file';
  const [section, index, ...rest] = path;
  if (section === 'cargo' && typeof index === 'number') return [`cargo entry ${index + 1}`, ...rest.map(String)].join(', ');
  if (section === 'thinning' && typeof index === 'number') return [`thinning rule ${index + 1}`, ...rest.map(String)].join(', ');
  if (section === 'ships' && index !== undefined) return `ships, ${String(index)}`;
  return path.map(String).join(', ');
}
