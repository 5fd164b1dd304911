// The MQTT load of the benchmarks (bench/mqtt.mjs, `npm run bench:profile -- --mqtt`): a generator
// of its own on mqtt-packet, many publishes in flight per connection, the same for the gateway and
// for Mosquitto.
import { connect } from 'node:net';
import { generate, parser as packetParser } from 'mqtt-packet';
import { cpuSeconds } from '../../scripts/lib/proc.mjs';
import { percentile } from '../../scripts/lib/stats.mjs';

/** Readings in a batch message (harbor/v1/ingest). */
export const MQTT_BATCH = 100;

/** @param {number} i */
const singlePayload = (i) => String((i % 1000) / 10);
/** @param {number} i @param {number} conn */
const batchPayload = (i, conn) =>
  JSON.stringify(Array.from({ length: MQTT_BATCH }, (_, j) => ({ ship_id: `ship-${conn}`, cargo_id: `c${j}`, value: i + j / 100 })));

/**
 * @typedef {object} MqttLoadResult
 * @property {number} messagesPerS  acknowledged (QoS 1) or sent (QoS 0) messages a second
 * @property {number} readingsPerS
 * @property {number | null} p50  PUBACK latency, ms (QoS 1)
 * @property {number | null} p99
 * @property {number | undefined} cpu  the target's CPU seconds over the run, when its pid is given
 * @property {number} readings
 */

/**
 * One run: `connections` clients, each keeping `window` QoS 1 publishes in flight (QoS 0: writing
 * as fast as the socket drains), for `durationMs`. Single readings go to
 * harbor/v1/ship-{conn}/c{n % 8} (a number), batches of MQTT_BATCH to harbor/v1/ingest.
 * @param {{ port: number, qos: 0 | 1, kind: 'single' | 'batch', connections: number, window: number, durationMs: number, password?: string, pid?: number }} target
 * @returns {Promise<MqttLoadResult>}
 */
export async function mqttLoad(target) {
  /** @type {number[]} */
  const latencies = [];
  let acked = 0;
  let sent = 0;
  const deadline = Date.now() + target.durationMs;
  const client = (/** @type {number} */ conn) =>
    new Promise((resolve, reject) => {
      const socket = connect(target.port, '127.0.0.1');
      socket.setNoDelay(true);
      const parser = packetParser({ protocolVersion: 4 });
      /** @type {Map<number, number>} */
      const started = new Map();
      let nextId = 1;
      let done = false;
      const pump = () => {
        while (!done && (target.qos === 0 ? socket.writableLength < 64 * 1024 : started.size < target.window)) {
          if (Date.now() > deadline) {
            done = true;
            if (target.qos === 0 || started.size === 0) socket.end(generate({ cmd: 'disconnect' }));
            return;
          }
          const id = nextId;
          nextId = (nextId % 65535) + 1;
          const topic = target.kind === 'single' ? `harbor/v1/ship-${conn}/c${sent % 8}` : 'harbor/v1/ingest';
          const payload = target.kind === 'single' ? singlePayload(sent) : batchPayload(sent, conn);
          sent += 1;
          if (target.qos === 1) started.set(id, performance.now());
          socket.write(generate({ cmd: 'publish', topic, payload, qos: target.qos, messageId: id, dup: false, retain: false }));
        }
      };
      parser.on('packet', (packet) => {
        if (packet.cmd === 'connack') {
          if (packet.returnCode !== 0) reject(new Error(`CONNACK ${packet.returnCode}`));
          else pump();
        } else if (packet.cmd === 'puback') {
          const at = started.get(packet.messageId ?? 0);
          started.delete(packet.messageId ?? 0);
          if (at !== undefined && !done) {
            latencies.push(performance.now() - at);
            acked += 1;
          }
          if (done && started.size === 0) socket.end(generate({ cmd: 'disconnect' }));
          else pump();
        }
      });
      socket.on('data', (chunk) => parser.parse(chunk));
      socket.on('drain', pump);
      socket.on('error', (error) => reject(new Error(`connection ${conn} (sent ${sent}, done ${done}): ${error.message}`)));
      socket.on('close', resolve);
      socket.write(
        generate({
          cmd: 'connect',
          protocolId: 'MQTT',
          protocolVersion: 4,
          clientId: `bench-${conn}-${process.pid}`,
          clean: true,
          keepalive: 60,
          username: `bench-${conn}`,
          ...(target.password === undefined ? {} : { password: Buffer.from(target.password) }),
        }),
      );
    });
  const cpuBefore = target.pid === undefined ? undefined : cpuSeconds(target.pid);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: target.connections }, (_, conn) => client(conn)));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = target.pid === undefined || cpuBefore === undefined ? undefined : (cpuSeconds(target.pid) ?? cpuBefore) - cpuBefore;
  const messages = target.qos === 1 ? acked : sent;
  return {
    messagesPerS: messages / seconds,
    readingsPerS: (messages * (target.kind === 'batch' ? MQTT_BATCH : 1)) / seconds,
    p50: percentile(latencies, 50) ?? null,
    p99: percentile(latencies, 99) ?? null,
    cpu,
    readings: messages * (target.kind === 'batch' ? MQTT_BATCH : 1),
  };
}

export { batchPayload as mqttBatchPayload, singlePayload as mqttSinglePayload };
