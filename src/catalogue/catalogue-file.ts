import { parseDocument } from 'yaml';
import * as z from 'zod';
import { type Catalogue, MAX_ID } from './catalogue.js';

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
