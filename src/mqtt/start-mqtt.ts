import type { Logger } from 'pino';
import type { MqttBrokerConfig, MqttSubscribeConfig } from '../config/mqtt-config.js';
import type { ConnectionGate } from '../http/connection-gate.js';
import type { InflightBudget } from '../http/inflight-budget.js';
import type { FailureDelay } from '../http/middleware/api-key/failure-delay.js';
import type { KeyStore, Principal } from '../keys/key-store.js';
import { IngestDeadLetters } from '../queue/dead-letters.js';
import type { QueueWriter } from '../queue/queue-writer.js';
import type { Validator } from '../reading/parse-readings.js';
import type { ReceiveClock } from '../reading/receive-clock.js';
import { MqttStats, MqttSubscriptionStats, type GatewayStats } from '../stats.js';
import { DeviceSession, SessionTable } from './device-session.js';
import { MqttIngest } from './mqtt-ingest.js';
import { listenMqtt, type MqttListeners } from './mqtt-server.js';
import { subscribeToSite } from './subscriber/site-subscription.js';

export interface MqttDeps {
  broker: MqttBrokerConfig | undefined;
  subscribe: MqttSubscribeConfig | undefined;
  host: string;
  certificate: { cert: string; key: string };
  gate: ConnectionGate;
  budget: InflightBudget;
  queue: QueueWriter;
  clock: ReceiveClock;
  stats: GatewayStats;
  keys: KeyStore;
  failureDelay: FailureDelay;
  validator: Validator;
  maxBatchReadings: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  stopping: AbortSignal;
  logger: Logger;
  accepted?: (principal: Principal, record: string, readings: number) => void;
}

export interface RunningMqtt {
  /** The listening ports, when the endpoint for devices is on. */
  readonly port: number | undefined;
  readonly tlsPort: number | undefined;
  setCertificate(certificate: { cert: string; key: string }): void;
  /** Takes no new connection; acknowledges what is committed, disconnects everyone by `deadline`. */
  stop(deadline: number): Promise<void>;
}

/**
 * Starts MQTT as configured: the endpoint for devices (`MQTT=on`) and the subscription to a site
 * broker (`MQTT_SUBSCRIBE_URL`). Loaded only when one of them is on, so MQTT costs nothing otherwise.
 */
export async function startMqtt(deps: MqttDeps): Promise<RunningMqtt> {
  const stats = new MqttStats();
  deps.stats.mqtt = stats;
  const deadLetters = new IngestDeadLetters(deps.queue.dataDir, deps.queue.durability);
  const ingest = new MqttIngest({ ...deps, deadLetters });
  const sessions = new SessionTable();
  /** Every connection, CONNECTed or not, so a stop reaches them all. */
  const open = new Set<DeviceSession>();
  let listeners: MqttListeners | undefined;
  if (deps.broker !== undefined) {
    const sessionDeps = {
      ...deps,
      ingest,
      sessions,
      config: deps.broker,
      connectTimeoutMs: deps.headersTimeoutMs,
      packetTimeoutMs: deps.requestTimeoutMs,
      stats,
    };
    try {
      listeners = await listenMqtt({
        host: deps.host,
        port: deps.broker.port,
        tlsPort: deps.broker.tlsPort,
        certificate: deps.certificate,
        gate: deps.gate,
        handshakeTimeoutMs: deps.headersTimeoutMs,
        onConnection: (socket) => {
          const session = new DeviceSession(socket, sessionDeps);
          open.add(session);
          socket.once('close', () => open.delete(session));
        },
      });
    } catch (error) {
      deadLetters.close();
      throw error;
    }
  }
  // Sessions on a revoked key, or one that no longer allows what they do, end when the keys change.
  const stopWatchingKeys = deps.keys.onChange(() => {
    for (const session of open) session.keysChanged();
  });
  let subscription: ReturnType<typeof subscribeToSite> | undefined;
  if (deps.subscribe !== undefined) {
    stats.subscription = new MqttSubscriptionStats();
    subscription = subscribeToSite({
      ...deps,
      config: deps.subscribe,
      ingest,
      maxPacketBytes: deps.broker?.maxPacketBytes ?? 1024 * 1024,
      stats: stats.subscription,
    });
  }
  return {
    port: listeners?.port,
    tlsPort: listeners?.tlsPort,
    setCertificate: (certificate) => listeners?.setCertificate(certificate),
    stop: async (deadline) => {
      stopWatchingKeys();
      const closed = listeners?.close();
      for (const session of open) session.stop();
      const cut = setTimeout(
        () => {
          for (const session of open) session.cut();
        },
        Math.max(0, deadline - Date.now()),
      );
      await Promise.all([closed, subscription?.stop(deadline)]);
      clearTimeout(cut);
      deadLetters.close();
    },
  };
}
