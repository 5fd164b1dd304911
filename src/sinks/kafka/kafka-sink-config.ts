import type { RemoteSinkSettings } from '../sink.js';

export type KafkaSaslMechanism = 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512';

/** The Kafka sink's settings, resolved (the SASL password read from its file or credential). */
export interface KafkaSinkConfig extends RemoteSinkSettings {
  /** host:port of one or more brokers to bootstrap from. */
  brokers: string[];
  topic: string;
  clientId: string;
  /** TLS to the brokers, with the system CAs or those of `tlsCaFile`. */
  tls: boolean;
  tlsCaFile: string | undefined;
  sasl: { mechanism: KafkaSaslMechanism; username: string; password: string } | undefined;
  /** How long one send may take, its retries while the broker is away included, before the batch counts as failed. */
  timeoutMs: number;
}
