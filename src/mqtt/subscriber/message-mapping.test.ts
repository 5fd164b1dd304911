import { describe, expect, it } from 'vitest';
import { MQTT_PRESETS, mqttMappingOf } from '../../config/mqtt-config.js';
import { mapMessage } from './message-mapping.js';

const map = (preset: keyof typeof MQTT_PRESETS, topic: string, payload: string) =>
  mapMessage(MQTT_PRESETS[preset], topic, Buffer.from(payload));

/** The readings of one ship, their cargo ids and values in order. */
const readingsOf = (ship_id: string, values: Record<string, number>, time?: string) =>
  Object.entries(values).map(([cargo_id, value]) => ({ time, ship_id, cargo_id, value }));

// The payloads docs/mqtt.md shows, as each firmware publishes them.
const presetCases: {
  name: string;
  preset: keyof typeof MQTT_PRESETS;
  topic: string;
  payload: string;
  ship: string;
  values: Record<string, number>;
}[] = [
  {
    name: 'zigbee2mqtt: every number and boolean of the device state, the friendly name as ship',
    preset: 'zigbee2mqtt',
    topic: 'zigbee2mqtt/greenhouse',
    payload:
      '{"battery":97,"humidity":41.5,"linkquality":120,"temperature":21.37,"voltage":2995,"contact":false,"state":"ON","update":{"state":"idle","installed_version":1}}',
    ship: 'greenhouse',
    values: { battery: 97, humidity: 41.5, linkquality: 120, temperature: 21.37, voltage: 2995, contact: 0 },
  },
  {
    name: 'tasmota: nested sensor fields joined with a dot, its local Time left out',
    preset: 'tasmota',
    topic: 'tele/plug-3/SENSOR',
    payload:
      '{"Time":"2026-02-04T11:00:00","ENERGY":{"TotalStartTime":"2025-01-01T00:00:00","Total":12.345,"Power":57,"Voltage":"231"},"AM2301":{"Temperature":21.3,"Humidity":40.1},"TempUnit":"C"}',
    ship: 'plug-3',
    values: { 'ENERGY.Total': 12.345, 'ENERGY.Power': 57, 'ENERGY.Voltage': 231, 'AM2301.Temperature': 21.3, 'AM2301.Humidity': 40.1 },
  },
  {
    name: "tasmota: a DS18B20 probe's Id and a serial with leading zeros are names, not readings",
    preset: 'tasmota',
    topic: 'tele/boiler/SENSOR',
    payload:
      '{"Time":"2026-02-04T11:00:00","DS18B20":{"Id":"031697792281","Temperature":58.2},"Meter":{"Serial":"12345","Code":"0042","Counter":"12345678901234567","Reading":"812.5"},"TempUnit":"C"}',
    ship: 'boiler',
    values: { 'DS18B20.Temperature': 58.2, 'Meter.Reading': 812.5 },
  },
  {
    name: 'esphome: the node and the sensor from the topic, the value alone as text',
    preset: 'esphome',
    topic: 'boiler/sensor/flow_temperature/state',
    payload: '58.25',
    ship: 'boiler',
    values: { flow_temperature: 58.25 },
  },
  {
    name: 'esphome: "nan" gives nothing',
    preset: 'esphome',
    topic: 'boiler/sensor/flow_temperature/state',
    payload: 'nan',
    ship: 'boiler',
    values: {},
  },
  {
    name: 'shelly: the component before each field of a Gen2 status',
    preset: 'shelly',
    topic: 'shellyplus1pm-a8032ab1c2d3/status/switch:0',
    payload:
      '{"id":0,"source":"timer","output":true,"apower":57.3,"voltage":231.4,"current":0.252,"aenergy":{"total":1234.567,"by_minute":[1,2,3],"minute_ts":1770202800},"temperature":{"tC":41.2,"tF":106.2}}',
    ship: 'shellyplus1pm-a8032ab1c2d3',
    values: {
      'switch:0.output': 1,
      'switch:0.apower': 57.3,
      'switch:0.voltage': 231.4,
      'switch:0.current': 0.252,
      'switch:0.aenergy.total': 1234.567,
      'switch:0.temperature.tC': 41.2,
      'switch:0.temperature.tF': 106.2,
    },
  },
];

describe('presets', () => {
  it.each(presetCases)('$name', ({ preset, topic, payload, ship, values }) => {
    expect(map(preset, topic, payload)).toEqual({ ok: true, readings: readingsOf(ship, values) });
  });
});

describe('custom mappings', () => {
  const custom = (env: Record<string, string>) => {
    const problems: string[] = [];
    const mapping = mqttMappingOf(
      {
        mqttSubscribeTopics: env['topics']?.split(','),
        mqttSubscribeShip: env['ship'],
        mqttSubscribeCargo: env['cargo'],
        mqttSubscribeTime: env['time'],
      } as never,
      problems,
    );
    if (mapping === undefined) throw new Error(problems.join('; '));
    return mapping;
  };

  it('takes the ship and the time from fields, and leaves them out of the readings', () => {
    const mapping = custom({ topics: 'site/+', ship: 'field:meta.device', time: 'field:ts' });
    const payload = '{"meta":{"device":"pump-1","rev":2},"ts":"2026-02-04T10:00:00Z","flow":3.5,"on":true}';
    expect(mapMessage(mapping, 'site/x', Buffer.from(payload))).toEqual({
      ok: true,
      readings: readingsOf('pump-1', { 'meta.rev': 2, flow: 3.5 }, '2026-02-04T10:00:00Z'),
    });
  });

  it('refuses a message without its ship id, naming where it was looked for', () => {
    const mapping = custom({ topics: 'site/+', ship: 'field:device' });
    expect(mapMessage(mapping, 'site/x', Buffer.from('{"flow":1}'))).toMatchObject({
      ok: false,
      message: 'No ship id at payload field device',
    });
    expect(mapMessage(custom({ topics: '#', ship: 'topic:3' }), 'a/b', Buffer.from('{"flow":1}'))).toMatchObject({ ok: false });
  });

  it('takes a topic level as cargo id with a number or {"value"} as payload', () => {
    const mapping = custom({ topics: 'plant/+/+', ship: 'topic:1', cargo: 'topic:2' });
    expect(mapMessage(mapping, 'plant/line-2/speed', Buffer.from('{"value":"12.5"}'))).toEqual({
      ok: true,
      readings: readingsOf('line-2', { speed: 12.5 }),
    });
  });

  it('needs topics and a ship id source without a preset', () => {
    const problems: string[] = [];
    expect(mqttMappingOf({ mqttSubscribeTopics: ['a/#'] }, problems)).toBeUndefined();
    expect(problems).toEqual(['MQTT_SUBSCRIBE_URL needs MQTT_SUBSCRIBE_PRESET, or MQTT_SUBSCRIBE_TOPICS and MQTT_SUBSCRIBE_SHIP']);
  });

  it('does not follow nesting without end', () => {
    let deep = '1';
    for (let i = 0; i < 10_000; i++) deep = `{"a":${deep}}`;
    const mapping = custom({ topics: '#', ship: 'topic:0' });
    expect(mapMessage(mapping, 'x', Buffer.from(deep))).toEqual({ ok: true, readings: [] });
  });
});
