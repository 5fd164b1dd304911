const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
};

/** Parses "1048576", "512KiB", "1 GiB", "64MB" into bytes; null when the text is not a size. */
export function parseByteSize(text: string): number | null {
  const match = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(text);
  if (!match) return null;
  const unit = UNITS[match[2]!.toLowerCase()];
  if (unit === undefined) return null;
  const bytes = Number(match[1]) * unit;
  return Number.isSafeInteger(bytes) ? bytes : null;
}
