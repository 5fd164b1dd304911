/**
 * Strings that look like numbers but name a thing: a sensor's id, a serial, an address. Payloads
 * carry them beside their readings (Tasmota's DS18B20 `"Id":"031697792281"`), and read as numbers
 * they become readings of nothing.
 */

/** The last word of a field name that says the field names a thing. */
const THING_WORDS = new Set(['id', 'uid', 'uuid', 'guid', 'serial', 'sn', 'mac', 'eui', 'imei', 'iccid']);

/**
 * Whether a field's name says it names a thing: its last word (words split at `_`, `-`, `.`, blanks
 * and a lower-to-upper case change) is `id`, `uid`, `uuid`, `guid`, `serial`, `sn`, `mac`, `eui`,
 * `imei` or `iccid`, or it ends in `serial number`: `Id`, `ID`, `sensor_id`, `DeviceId`, `DevEUI`,
 * `serialNumber`; not `humidity`, `valid`, `paid`.
 */
export function namesAThing(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== '');
  const last = words.at(-1);
  if (last === undefined) return false;
  return THING_WORDS.has(last) || (last === 'number' && words.at(-2) === 'serial');
}

/** Significant digits a double holds exactly, at most: more are a label's. */
const MAX_DIGITS = 15;

/**
 * Whether a numeric-looking string is written as a label, not a quantity: a zero before another
 * digit at its start (`"0316"`, not `"0.5"`), or more than 15 digits.
 */
export function labelDigits(text: string): boolean {
  const digits = text.trim().replace(/^[+-]/, '');
  if (/^0\d/.test(digits)) return true;
  let count = 0;
  for (let i = 0; i < digits.length; i++) {
    const code = digits.charCodeAt(i);
    if (code >= 48 && code <= 57) count += 1;
    else if (code === 101 || code === 69) break;
  }
  return count > MAX_DIGITS;
}
