/** The packet types of a publish's acknowledgement: PUBACK for QoS 1, PUBREC for QoS 2. */
const ACK_TYPE = { 1: 0x40, 2: 0x50 } as const;

/** Bytes of one acknowledgement: MQTT 3.1.1 has none but the packet id; MQTT 5 adds the reason and an empty property list. */
export const ackSize = (version: number): number => (version === 5 ? 6 : 4);

/**
 * Writes the acknowledgement of a QoS `qos` publish at `at`, byte for byte as mqtt-packet's
 * `generate` makes it (`src/mqtt/publish-acks.test.ts`), so that a session's acknowledgements of
 * one commit go out as one buffer in one write. `reason` is MQTT 5's (3.1.1 has none).
 */
export function writeAck(into: Buffer, at: number, qos: 1 | 2, messageId: number, version: number, reason: number): void {
  into[at] = ACK_TYPE[qos];
  into[at + 1] = version === 5 ? 4 : 2;
  into[at + 2] = messageId >> 8;
  into[at + 3] = messageId & 0xff;
  if (version === 5) {
    into[at + 4] = reason;
    into[at + 5] = 0;
  }
}
