import { describe, expect, it } from 'vitest';
import { parseByteSize as applianceParse } from '../../appliance/board/settings.mjs';
import { parseByteSize as gatewayParse } from '../../src/config/size.js';

// The appliance's first boot checks QUEUE_MAX_BYTES in plain JavaScript before the gateway ever
// reads it: both parsers answer every case of this one table alike.
const SIZES: [string, number | null][] = [
  ['1048576', 1048576],
  ['512KiB', 512 * 1024],
  ['1 GiB', 1024 ** 3],
  [' 2 mib ', 2 * 1024 ** 2],
  ['64MB', 64e6],
  ['10kb', 10_000],
  ['7b', 7],
  ['3GB', 3e9],
  ['', null],
  ['MiB', null],
  ['1.5GiB', null],
  ['-1', null],
  ['3 parsecs', null],
  ['99999999999999999999', null],
  ['9999999999 GiB', null],
];

describe.each([
  ['the gateway', gatewayParse],
  ['the appliance first boot', applianceParse],
])('parseByteSize of %s', (_, parse) => {
  it.each(SIZES)('reads %j as %s', (text, bytes) => expect(parse(text)).toBe(bytes));
});
