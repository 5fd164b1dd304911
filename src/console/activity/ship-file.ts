import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { replaceFileDurably } from '../../durable-file.js';
import type { SavedShips } from './ship-table.js';

/** The Devices page's ships across restarts, in the data directory. */
export const shipFile = (dataDir: string): string => join(dataDir, 'console-ships.json');

/** How often the table is written while ships send: an SD card takes a few small files an hour easily. */
export const SAVE_EVERY_MS = 15 * 60_000;

const id = z.string().min(1).max(4096);
const savedShipsSchema = z.object({
  version: z.literal(1),
  sinceMs: z.number().nonnegative(),
  forgotten: z.number().int().nonnegative(),
  leftOutReadings: z.number().int().nonnegative(),
  leftOutShips: z.array(id).max(100),
  ships: z.array(
    z.object({
      id,
      key: z.string().max(256),
      lastSeenMs: z.number().nonnegative(),
      gapMs: z.number().nonnegative().optional(),
      values: z.array(z.tuple([id, z.number()])).max(1000),
    }),
  ),
});

/** What the file holds; undefined when there is none. Throws, naming what is wrong, when it cannot be read as a table. */
export function readShipFile(path: string): SavedShips | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const parsed = savedShipsSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  const { version: _version, ...saved } = parsed.data;
  return saved;
}

/** Replaces the file whole (written beside it, fsynced, renamed): a power cut leaves the last one or this one. */
export function writeShipFile(path: string, saved: SavedShips): void {
  replaceFileDurably(path, JSON.stringify({ version: 1, ...saved }), 0o640);
}
