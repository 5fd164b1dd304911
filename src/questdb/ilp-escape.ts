const ESCAPE = /[ ,=\n\r\\]/g;

const escapeChar = (char: string): string => (char === '\\' ? '\\\\' : `\\${char}`);

/** Escapes a table name, tag value or column name as ILP writes them outside quotes. */
export function escapeIlp(name: string): string {
  return name.replace(ESCAPE, escapeChar);
}

/** A string field as ILP writes it: quoted, with quotes and backslashes escaped and newlines as spaces. */
export const ilpString = (text: string): string => `"${text.replace(/[\\"]/g, '\\$&').replace(/[\r\n]/g, ' ')}"`;
