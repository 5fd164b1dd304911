const ESCAPE = /[ ,=\n\r\\]/g;

const escapeChar = (char: string): string => (char === '\\' ? '\\\\' : `\\${char}`);

/** Escapes a table name, tag value or column name as ILP writes them outside quotes. */
export function escapeIlp(name: string): string {
  return name.replace(ESCAPE, escapeChar);
}
