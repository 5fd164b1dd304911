import type { IPublishPacket } from 'mqtt-packet';

/**
 * A PUBLISH read straight from its whole frame (frame-reader.ts), as mqtt-packet's parser reads it,
 * for the packet a device sends most: no property beyond an empty list in MQTT 5. Undefined for
 * any other packet, or a PUBLISH with properties, a QoS of 3, or a topic or packet id that does not
 * fit: mqtt-packet's parser then reads it and says what is wrong. The parser handles one packet at
 * a time through a buffer list and emits it as an event; this reads a few bytes in place.
 * `src/mqtt/publish-frame.test.ts` holds the two to the same packets.
 */
export function readPublishFrame(frame: Buffer, version: number): IPublishPacket | undefined {
  const first = frame[0]!;
  if (first >> 4 !== 3) return undefined;
  const qos = (first >> 1) & 3;
  if (qos === 3) return undefined;
  // The remaining length is whatever follows it: the frame reader cut the frame to it.
  let at = 1;
  while (at < 5 && (frame[at]! & 0x80) !== 0) at++;
  at++;
  const length = frame.length - at;
  if (at + 2 > frame.length) return undefined;
  const topicEnd = at + 2 + frame.readUInt16BE(at);
  if (topicEnd > frame.length) return undefined;
  const topic = frame.toString('utf8', at + 2, topicEnd);
  at = topicEnd;
  let messageId: number | undefined;
  if (qos > 0) {
    if (at + 2 > frame.length) return undefined;
    messageId = frame.readUInt16BE(at);
    at += 2;
  }
  if (version === 5) {
    // A property list's length of 0, one byte; anything else is left to the parser.
    if (frame[at] !== 0) return undefined;
    at += 1;
  }
  const packet: IPublishPacket = {
    cmd: 'publish',
    retain: (first & 1) !== 0,
    qos: qos as 0 | 1 | 2,
    dup: (first & 8) !== 0,
    length,
    topic,
    payload: frame.subarray(at),
  };
  if (messageId !== undefined) packet.messageId = messageId;
  return packet;
}
