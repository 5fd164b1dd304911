/**
 * Epoch nanoseconds (a decimal string, as the queue keeps them) to RFC 3339 in UTC with all nine
 * fraction digits: the form forwarded readings carry, so a destination gets the exact instant back.
 */
export function formatTimestampNs(timeNs: string): string {
  const digits = timeNs.padStart(10, '0');
  const seconds = Number(digits.slice(0, -9));
  const iso = new Date(seconds * 1000).toISOString();
  return `${iso.slice(0, 19)}.${digits.slice(-9)}Z`;
}
