import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { problemsOf } from '../../test/support/config-problems.js';
import { tempDir } from '../../test/support/temp-dir.js';
import { loadConfig } from './config.js';

describe('MQTT settings', () => {
  it('leave MQTT off, and out of the configuration, until asked for', () => {
    const config = loadConfig({});
    expect(config.mqtt).toBeUndefined();
    expect(config.mqttSubscribe).toBeUndefined();
    expect(Object.keys(config).filter((key) => key.startsWith('mqtt'))).toEqual(['mqtt', 'mqttSubscribe']);
  });

  it('gather the endpoint for devices with documented defaults', () => {
    expect(loadConfig({ MQTT: 'on' }).mqtt).toEqual({
      port: 1883,
      tlsPort: 8883,
      anonymous: false,
      maxPacketBytes: 1024 * 1024,
      maxInflight: 64,
      keepAliveMaxS: 300,
    });
  });

  it('take a preset for the subscription, with what the settings say instead of its parts', () => {
    const file = join(tempDir('mqtt-secret'), 'password');
    writeFileSync(file, 'broker-password\n');
    const sub = loadConfig({
      MQTT_SUBSCRIBE_URL: 'mqtts://broker.site:8883',
      MQTT_SUBSCRIBE_PRESET: 'tasmota',
      MQTT_SUBSCRIBE_TOPICS: 'tele/+/SENSOR, tele/+/STATE',
      MQTT_SUBSCRIBE_USERNAME: 'harbor',
      MQTT_SUBSCRIBE_PASSWORD_FILE: file,
      GATEWAY_NAME: 'pier 7',
    }).mqttSubscribe;
    expect(sub).toMatchObject({
      url: 'mqtts://broker.site:8883',
      clientId: 'harbor-gateway-pier_7',
      username: 'harbor',
      password: 'broker-password',
      preset: 'tasmota',
      mapping: { topics: ['tele/+/SENSOR', 'tele/+/STATE'], ship: { from: 'topic', level: 1 }, time: { from: 'receive' } },
    });
  });

  it('refuse a subscription without topics or ship id, a URL with credentials, and bad filters', () => {
    expect(problemsOf({ MQTT_SUBSCRIBE_URL: 'mqtt://broker:1883' })).toEqual([
      'MQTT_SUBSCRIBE_URL needs MQTT_SUBSCRIBE_PRESET, or MQTT_SUBSCRIBE_TOPICS and MQTT_SUBSCRIBE_SHIP',
    ]);
    expect(problemsOf({ MQTT_SUBSCRIBE_URL: 'mqtt://user:secret@broker:1883', MQTT_SUBSCRIBE_PRESET: 'esphome' })[0]).toMatch(
      /^MQTT_SUBSCRIBE_URL must be mqtt:\/\/host:port/,
    );
    expect(problemsOf({ MQTT_SUBSCRIBE_URL: 'http://broker', MQTT_SUBSCRIBE_PRESET: 'esphome' })[0]).toMatch(/^MQTT_SUBSCRIBE_URL/);
    for (const filter of ['a/#/b', 'a/b#', 'a/+b', 'a,,b']) {
      expect(problemsOf({ MQTT_SUBSCRIBE_TOPICS: filter })[0]).toMatch(/^MQTT_SUBSCRIBE_TOPICS/);
    }
    expect(problemsOf({ MQTT_SUBSCRIBE_SHIP: 'device' })[0]).toMatch(/^MQTT_SUBSCRIBE_SHIP must be topic:N or field:NAME/);
  });

  it('refuse anonymous clients and a password in the environment in production', () => {
    const problems = problemsOf({
      GATEWAY_ENV: 'production',
      API_KEY: 'a-production-key-0123456789',
      MQTT: 'on',
      MQTT_ANONYMOUS: 'on',
      MQTT_SUBSCRIBE_URL: 'mqtt://broker:1883',
      MQTT_SUBSCRIBE_PRESET: 'zigbee2mqtt',
      MQTT_SUBSCRIBE_PASSWORD: 'broker-password-0123',
    });
    expect(problems).toContain(
      'MQTT_SUBSCRIBE_PASSWORD is refused in production: use MQTT_SUBSCRIBE_PASSWORD_FILE or the mqtt_subscribe_password credential',
    );
    expect(problems).toContain('MQTT_ANONYMOUS lets any client on the network publish: refused in production');
  });
});
