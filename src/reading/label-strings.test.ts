import { describe, expect, it } from 'vitest';
import { labelDigits, namesAThing } from './label-strings.js';

describe('strings that name a thing', () => {
  it('are told by the last word of their field name', () => {
    for (const name of [
      'Id',
      'ID',
      'id',
      'sensor_id',
      'DeviceId',
      'device-id',
      'DevEUI',
      'serial',
      'serialNumber',
      'serial_number',
      'mac',
      'wifi.mac',
      'SN',
      'imei',
    ]) {
      expect(namesAThing(name), name).toBe(true);
    }
    for (const name of ['humidity', 'valid', 'paid', 'Idle', 'identity', 'Temperature', 'Power', 'snr', 'macro', '']) {
      expect(namesAThing(name), name).toBe(false);
    }
  });

  it('are told by their digits: a leading zero before a digit, or more than 15 digits', () => {
    for (const text of ['031697792281', '007', '-01', '1234567890123456']) expect(labelDigits(text), text).toBe(true);
    for (const text of ['0', '0.5', '-0.25', '21.5', '123456789012345', '1.5e300', ' 42 ']) expect(labelDigits(text), text).toBe(false);
  });
});
