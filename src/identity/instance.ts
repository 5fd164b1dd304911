import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { replaceFileDurably } from '../durable-file.js';
import { isInstanceId } from '../reading/site-id.js';
import type { Board } from './board.js';

/**
 * This gateway's instance: an id of its own, made at its first start in DATA_DIR, which it sends
 * with what it forwards, so that a centre tells two gateways that claim one site apart (a cloned
 * card, two sites given one name). It is bound to the board it was made on: on another board (the
 * card cloned, or moved) a new one is made.
 */
export interface Instance {
  id: string;
  /** The hash of the board it was made on (board.ts); undefined where the board could not be read. */
  board: string | undefined;
  /** When it was made (ISO 8601). */
  madeAt: string;
}

/** How this start came by its instance. */
export type InstanceOrigin =
  | { kind: 'kept' }
  | { kind: 'made'; reason: 'first start' | 'unreadable' }
  /** The data directory was made on another board: a cloned or moved card. */
  | { kind: 'renewed'; previous: string };

/** The file in DATA_DIR. */
export const instanceFile = (dataDir: string): string => join(dataDir, 'instance.json');

/** Lower-case base32 without padding: readable, safe in a header, a file name and JSON. */
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** A new id: 80 random bits as 16 base32 characters. */
export function newInstanceId(): string {
  const bytes = randomBytes(10);
  let bits = 0;
  let value = 0;
  let id = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      id += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return id;
}

function readInstance(path: string): Instance | 'missing' | 'unreadable' {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'unreadable';
  }
  try {
    const parsed = JSON.parse(text) as Partial<Instance>;
    if (typeof parsed.id !== 'string' || !isInstanceId(parsed.id)) return 'unreadable';
    return {
      id: parsed.id,
      board: typeof parsed.board === 'string' ? parsed.board : undefined,
      madeAt: typeof parsed.madeAt === 'string' ? parsed.madeAt : '',
    };
  } catch {
    return 'unreadable';
  }
}

/**
 * The instance of the gateway whose data directory is `dataDir`, on `board`: the one in the
 * directory, else a new one, written durably before it is used. An instance made on another board
 * is replaced; one made where no board could be read is bound to this one and kept; on a board that
 * cannot be read now, the one there is kept.
 */
export function loadInstance(dataDir: string, board: Board | undefined, now = new Date()): { instance: Instance; origin: InstanceOrigin } {
  const path = instanceFile(dataDir);
  const found = readInstance(path);
  const make = (origin: InstanceOrigin): { instance: Instance; origin: InstanceOrigin } => {
    const instance = { id: newInstanceId(), board: board?.hash, madeAt: now.toISOString() };
    replaceFileDurably(path, `${JSON.stringify(instance)}\n`, 0o640);
    return { instance, origin };
  };
  if (found === 'missing') return make({ kind: 'made', reason: 'first start' });
  if (found === 'unreadable') return make({ kind: 'made', reason: 'unreadable' });
  if (board === undefined || found.board === board.hash) return { instance: found, origin: { kind: 'kept' } };
  if (found.board !== undefined) return make({ kind: 'renewed', previous: found.id });
  const bound = { ...found, board: board.hash };
  replaceFileDurably(path, `${JSON.stringify(bound)}\n`, 0o640);
  return { instance: bound, origin: { kind: 'kept' } };
}
