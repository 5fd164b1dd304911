import { connect, type IClientOptions, type MqttClient } from 'mqtt';

/** An MQTT.js client connected to the gateway (or refused: the CONNACK's error). */
export async function mqttClient(url: string, options: IClientOptions = {}): Promise<MqttClient> {
  const client = connect(url, { reconnectPeriod: 0, connectTimeout: 10_000, rejectUnauthorized: false, ...options });
  await new Promise<void>((resolve, reject) => {
    client.once('connect', () => resolve());
    client.once('error', (error) => {
      client.end(true);
      reject(error);
    });
    client.once('close', () => reject(new Error('closed before CONNACK')));
  });
  return client;
}

/** Publishes and resolves with the acknowledgement's reason code (0 for success; QoS 0 resolves once written). */
export function publish(client: MqttClient, topic: string, payload: string | Buffer, qos: 0 | 1 | 2): Promise<number> {
  return new Promise((resolve, reject) => {
    client.publish(topic, payload, { qos }, (error, packet) => {
      if (error === undefined || error === null) {
        resolve((packet as { reasonCode?: number } | undefined)?.reasonCode ?? 0);
        return;
      }
      const code = (error as { code?: number }).code;
      if (typeof code === 'number') resolve(code);
      else reject(error);
    });
  });
}

export const endClient = (client: MqttClient): Promise<void> => new Promise((resolve) => client.end(false, {}, () => resolve()));
