// The date and time of the last second formatted: readings forwarded together mostly share their
// second, and Date#toISOString is most of a formatted time's cost.
let lastSeconds = '';
let lastPrefix = '';

/**
 * Epoch nanoseconds (a decimal string, as the queue keeps them) to RFC 3339 in UTC with all nine
 * fraction digits: the form forwarded readings carry, so a destination gets the exact instant back.
 */
export function formatTimestampNs(timeNs: string): string {
  const digits = timeNs.padStart(10, '0');
  const seconds = digits.slice(0, -9);
  if (seconds !== lastSeconds) {
    lastPrefix = new Date(Number(seconds) * 1000).toISOString().slice(0, 19);
    lastSeconds = seconds;
  }
  return `${lastPrefix}.${digits.slice(-9)}Z`;
}
