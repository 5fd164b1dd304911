const ESCAPE = /[ ,=\n\r\\]/g;

const escapeChar = (char: string): string => (char === '\\' ? '\\\\' : `\\${char}`);

/** Escapes a table name, tag value or column name as ILP writes them outside quotes. */
export function escapeIlp(name: string): string {
  return name.replace(ESCAPE, escapeChar);
}

/** A string field's value as ILP writes it: quoted, quotes and backslashes escaped, on one line. */
export function ilpString(text: string): string {
  return `"${text.replace(/[\\"]/g, '\\$&').replace(/\n/g, ' ')}"`;
}
