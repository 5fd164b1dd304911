import type { SettingValues } from './settings.js';

/** Where one part of a reading comes from in an MQTT message: a level of its topic or a JSON field. */
export type TopicLevel = { from: 'topic'; level: number };
export type JsonField = { from: 'field'; path: string[] };

/** How messages of a site broker become readings. */
export interface MqttMapping {
  topics: string[];
  ship: TopicLevel | JsonField;
  /**
   * `fields`: every numeric field of a JSON object is a reading named after it (nested names joined
   * with `.`, `prefixLevel`'s topic level before them), fields under `exclude` left out, booleans as
   * 1 and 0 where `booleans`; `topic`: the topic level names the one reading the payload holds.
   */
  cargo: { from: 'fields'; exclude: string[]; booleans: boolean; prefixLevel?: number } | TopicLevel;
  time: { from: 'receive' } | JsonField;
}

/** The gateway as an MQTT endpoint for devices (`MQTT=on`). */
export interface MqttBrokerConfig {
  port: number;
  tlsPort: number;
  anonymous: boolean;
  maxPacketBytes: number;
  maxInflight: number;
  keepAliveMaxS: number;
}

/** The gateway as a subscriber of a site broker (`MQTT_SUBSCRIBE_URL`). */
export interface MqttSubscribeConfig {
  url: string;
  clientId: string;
  username: string | undefined;
  password: string | undefined;
  caFile: string | undefined;
  preset: string | undefined;
  mapping: MqttMapping;
}

type Preset = Omit<MqttMapping, 'topics'> & { topics: string[] };

/**
 * The sources sites run most, as their firmware publishes by default (docs/mqtt.md has example
 * payloads). Times are the gateway's receive times: Tasmota's `Time` is the device's local time
 * without an offset, and the others send none.
 */
export const MQTT_PRESETS: Record<NonNullable<SettingValues['mqttSubscribePreset']>, Preset> = {
  // zigbee2mqtt/<friendly name>: the device's state as one JSON object; contact, occupancy and
  // water_leak are booleans. Bridge topics have two levels and are not matched.
  zigbee2mqtt: {
    topics: ['zigbee2mqtt/+'],
    ship: { from: 'topic', level: 1 },
    cargo: { from: 'fields', exclude: ['last_seen', 'update', 'elapsed'], booleans: true },
    time: { from: 'receive' },
  },
  // tele/<device>/SENSOR: {"Time": local time, "<sensor>": {"Temperature": …}, "ENERGY": {…}}.
  tasmota: {
    topics: ['tele/+/SENSOR'],
    ship: { from: 'topic', level: 1 },
    cargo: { from: 'fields', exclude: ['Time'], booleans: false },
    time: { from: 'receive' },
  },
  // <node>/sensor/<name>/state: the value alone, as text ("21.50"; "nan" when the sensor failed).
  esphome: {
    topics: ['+/sensor/+/state'],
    ship: { from: 'topic', level: 0 },
    cargo: { from: 'topic', level: 2 },
    time: { from: 'receive' },
  },
  // Gen2 status notifications, <device id>/status/<component>:<id>: {"id":0,"apower":…,"aenergy":{"total":…}}.
  shelly: {
    topics: ['+/status/+'],
    ship: { from: 'topic', level: 0 },
    cargo: { from: 'fields', exclude: ['id', 'aenergy.minute_ts', 'ret_aenergy.minute_ts'], booleans: true, prefixLevel: 2 },
    time: { from: 'receive' },
  },
};

const locator = (text: string): TopicLevel | JsonField =>
  text.startsWith('topic:') ? { from: 'topic', level: Number(text.slice(6)) } : { from: 'field', path: text.slice(6).split('.') };

/**
 * The subscription's mapping: the preset's, with what the settings name instead. Undefined, with
 * the problem added, when the topics or the ship id have no source.
 */
export function mqttMappingOf(values: Partial<SettingValues>, problems: string[]): MqttMapping | undefined {
  const preset = values.mqttSubscribePreset === undefined ? undefined : MQTT_PRESETS[values.mqttSubscribePreset];
  const topics = values.mqttSubscribeTopics ?? preset?.topics;
  const ship = values.mqttSubscribeShip === undefined ? preset?.ship : locator(values.mqttSubscribeShip);
  if (topics === undefined || ship === undefined) {
    problems.push('MQTT_SUBSCRIBE_URL needs MQTT_SUBSCRIBE_PRESET, or MQTT_SUBSCRIBE_TOPICS and MQTT_SUBSCRIBE_SHIP');
    return undefined;
  }
  const cargoText = values.mqttSubscribeCargo;
  const cargo: MqttMapping['cargo'] =
    cargoText === undefined
      ? (preset?.cargo ?? { from: 'fields', exclude: [], booleans: false })
      : cargoText === 'fields'
        ? { from: 'fields', exclude: [], booleans: false }
        : { from: 'topic', level: Number(cargoText.slice(6)) };
  const timeText = values.mqttSubscribeTime;
  const time: MqttMapping['time'] =
    timeText === undefined
      ? (preset?.time ?? { from: 'receive' })
      : timeText === 'receive'
        ? { from: 'receive' }
        : { from: 'field', path: timeText.slice(6).split('.') };
  return { topics, ship, cargo, time };
}

/** The settings without the MQTT ones, which `Config` carries gathered in `mqtt` and `mqttSubscribe`. */
export function withoutMqttSettings<T extends object>(values: T): Omit<T, `mqtt${string}`> {
  return Object.fromEntries(Object.entries(values).filter(([key]) => !key.startsWith('mqtt'))) as Omit<T, `mqtt${string}`>;
}
