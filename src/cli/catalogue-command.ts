import { readFileSync } from 'node:fs';
import { cargoEntryFor } from '../catalogue/catalogue.js';
import { CatalogueError, parseCatalogue } from '../catalogue/catalogue-file.js';
import { SETTINGS } from '../config/settings.js';

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** EX_DATAERR: the file has a mistake. */
const EXIT_INVALID = 65;

/**
 * Checks the catalogue file (`CATALOGUE_FILE`, or the file named) as the gateway would load it,
 * and says what each cargo id given after it would be called: `harbor-gateway catalogue
 * [--file PATH] [CARGO_ID ...]`. Returns the exit status.
 */
export function catalogueCommand(args: string[], env: NodeJS.ProcessEnv, io: Output): number {
  const named = args[0] === '--file' ? args[1] : undefined;
  const ids = args[0] === '--file' ? args.slice(2) : args;
  const path = named ?? (env[SETTINGS.catalogueFile.env] || undefined);
  if (path === undefined || (args[0] === '--file' && named === undefined)) {
    io.err('usage: harbor-gateway catalogue [--file PATH] [CARGO_ID ...]   (the file: --file or CATALOGUE_FILE)\n');
    return 64;
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    io.err(`harbor-gateway: cannot read ${path}: ${(error as Error).message}\n`);
    return EXIT_INVALID;
  }
  try {
    const catalogue = parseCatalogue(text);
    io.out(`${path}: valid, ${catalogue.ships.size} ship names, ${catalogue.cargo.length} cargo entries\n`);
    for (const id of ids) {
      const entry = cargoEntryFor(catalogue, id);
      const range = entry?.min === undefined && entry?.max === undefined ? '' : `, normal ${entry?.min ?? '…'} to ${entry?.max ?? '…'}`;
      io.out(
        entry === undefined
          ? `${id}: no entry, shown as it is\n`
          : `${id}: ${entry.name ?? id} (${entry.match})${entry.unit ? `, ${entry.unit}` : ''}${range}\n`,
      );
    }
    return 0;
  } catch (error) {
    if (!(error instanceof CatalogueError)) throw error;
    io.err(`${path}: refused\n${error.problems.map((p) => `  ${p}\n`).join('')}`);
    return EXIT_INVALID;
  }
}
