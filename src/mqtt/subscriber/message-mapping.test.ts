import { describe, expect, it } from 'vitest';
import { MQTT_PRESETS, mqttMappingOf } from '../../config/mqtt-config.js';
import { mapMessage } from './message-mapping.js';

const map = (preset: keyof typeof MQTT_PRESETS, topic: string, payload: string) =>
  mapMessage(MQTT_PRESETS[preset], topic, Buffer.from(payload));

// The payloads docs/mqtt.md shows, as each firmware publishes them.
describe('presets', () => {
  it('zigbee2mqtt: every number and boolean of the device state, the friendly name as ship', () => {
    const payload =
      '{"battery":97,"humidity":41.5,"linkquality":120,"temperature":21.37,"voltage":2995,"contact":false,"state":"ON","update":{"state":"idle","installed_version":1}}';
    expect(map('zigbee2mqtt', 'zigbee2mqtt/greenhouse', payload)).toEqual({
      ok: true,
      readings: [
        { time: undefined, ship_id: 'greenhouse', cargo_id: 'battery', value: 97 },
        { time: undefined, ship_id: 'greenhouse', cargo_id: 'humidity', value: 41.5 },
        { time: undefined, ship_id: 'greenhouse', cargo_id: 'linkquality', value: 120 },
        { time: undefined, ship_id: 'greenhouse', cargo_id: 'temperature', value: 21.37 },
        { time: undefined, ship_id: 'greenhouse', cargo_id: 'voltage', value: 2995 },
        { time: undefined, ship_id: 'greenhouse', cargo_id: 'contact', value: 0 },
      ],
    });
  });

  it('tasmota: nested sensor fields joined with a dot, its local Time left out', () => {
    const payload =
      '{"Time":"2026-02-04T11:00:00","ENERGY":{"TotalStartTime":"2025-01-01T00:00:00","Total":12.345,"Power":57,"Voltage":"231"},"AM2301":{"Temperature":21.3,"Humidity":40.1},"TempUnit":"C"}';
    expect(map('tasmota', 'tele/plug-3/SENSOR', payload)).toEqual({
      ok: true,
      readings: [
        { time: undefined, ship_id: 'plug-3', cargo_id: 'ENERGY.Total', value: 12.345 },
        { time: undefined, ship_id: 'plug-3', cargo_id: 'ENERGY.Power', value: 57 },
        { time: undefined, ship_id: 'plug-3', cargo_id: 'ENERGY.Voltage', value: 231 },
        { time: undefined, ship_id: 'plug-3', cargo_id: 'AM2301.Temperature', value: 21.3 },
        { time: undefined, ship_id: 'plug-3', cargo_id: 'AM2301.Humidity', value: 40.1 },
      ],
    });
  });

  it('esphome: the node and the sensor from the topic, the value alone as text; "nan" gives nothing', () => {
    expect(map('esphome', 'boiler/sensor/flow_temperature/state', '58.25')).toEqual({
      ok: true,
      readings: [{ time: undefined, ship_id: 'boiler', cargo_id: 'flow_temperature', value: 58.25 }],
    });
    expect(map('esphome', 'boiler/sensor/flow_temperature/state', 'nan')).toEqual({ ok: true, readings: [] });
  });

  it('shelly: the component before each field of a Gen2 status', () => {
    const payload =
      '{"id":0,"source":"timer","output":true,"apower":57.3,"voltage":231.4,"current":0.252,"aenergy":{"total":1234.567,"by_minute":[1,2,3],"minute_ts":1770202800},"temperature":{"tC":41.2,"tF":106.2}}';
    expect(map('shelly', 'shellyplus1pm-a8032ab1c2d3/status/switch:0', payload)).toEqual({
      ok: true,
      readings: [
        { time: undefined, ship_id: 'shellyplus1pm-a8032ab1c2d3', cargo_id: 'switch:0.output', value: 1 },
        { time: undefined, ship_id: 'shellyplus1pm-a8032ab1c2d3', cargo_id: 'switch:0.apower', value: 57.3 },
        { time: undefined, ship_id: 'shellyplus1pm-a8032ab1c2d3', cargo_id: 'switch:0.voltage', value: 231.4 },
        { time: undefined, ship_id: 'shellyplus1pm-a8032ab1c2d3', cargo_id: 'switch:0.current', value: 0.252 },
        { time: undefined, ship_id: 'shellyplus1pm-a8032ab1c2d3', cargo_id: 'switch:0.aenergy.total', value: 1234.567 },
        { time: undefined, ship_id: 'shellyplus1pm-a8032ab1c2d3', cargo_id: 'switch:0.temperature.tC', value: 41.2 },
        { time: undefined, ship_id: 'shellyplus1pm-a8032ab1c2d3', cargo_id: 'switch:0.temperature.tF', value: 106.2 },
      ],
    });
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
      readings: [
        { time: '2026-02-04T10:00:00Z', ship_id: 'pump-1', cargo_id: 'meta.rev', value: 2 },
        { time: '2026-02-04T10:00:00Z', ship_id: 'pump-1', cargo_id: 'flow', value: 3.5 },
      ],
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
      readings: [{ time: undefined, ship_id: 'line-2', cargo_id: 'speed', value: 12.5 }],
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
