import fc from 'fast-check';
import { propertyRuns } from '../../test/support/property-sizes.js';
import { generate, type IPublishPacket, type Packet, parser } from 'mqtt-packet';
import { describe, expect, it } from 'vitest';
import { readPublishFrame } from './publish-frame.js';

/** What mqtt-packet's parser makes of one whole frame: its packet, or its error. */
function parsed(frame: Buffer, version: 4 | 5): Packet | Error {
  const p = parser({ protocolVersion: version });
  let out: Packet | Error = new Error('incomplete');
  p.on('packet', (packet: Packet) => {
    out = packet;
  });
  p.on('error', (error: Error) => {
    out = error;
  });
  p.parse(frame);
  return out;
}

/** A frame of `type` (flags included) around `body`, its remaining length as MQTT writes it. */
function frameOf(type: number, body: Uint8Array): Buffer {
  const length: number[] = [];
  let n = body.length;
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    length.push(byte);
  } while (n > 0);
  return Buffer.concat([Buffer.from([type, ...length]), body]);
}

const version = fc.constantFrom(4 as const, 5 as const);

const publishPacket = fc.record({
  topic: fc.string({ unit: 'grapheme', maxLength: 40 }),
  payload: fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
  qos: fc.constantFrom(0 as const, 1 as const, 2 as const),
  dup: fc.boolean(),
  retain: fc.boolean(),
  messageId: fc.integer({ min: 1, max: 65_535 }),
});

const properties = fc.option(
  fc.record(
    {
      payloadFormatIndicator: fc.boolean(),
      messageExpiryInterval: fc.integer({ min: 0, max: 2 ** 31 }),
      contentType: fc.string({ maxLength: 10 }),
      userProperties: fc.dictionary(fc.string({ minLength: 1, maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 2 }),
    },
    { requiredKeys: [] },
  ),
  { nil: undefined },
);

describe('readPublishFrame', () => {
  it('reads every PUBLISH without properties as mqtt-packet parses it, and leaves those with properties to it', () => {
    fc.assert(
      fc.property(publishPacket, version, properties, (fields, v, props) => {
        const withProperties = v === 5 && props !== undefined && Object.keys(props).length > 0;
        const packet: IPublishPacket = {
          cmd: 'publish',
          ...fields,
          ...(fields.qos === 0 ? { messageId: undefined } : {}),
          ...(withProperties ? { properties: props } : {}),
        };
        const frame = generate(packet, { protocolVersion: v });
        const fast = readPublishFrame(frame, v);
        if (withProperties) {
          expect(fast).toBeUndefined();
          return;
        }
        expect(fast).toBeDefined();
        expect({ ...fast }).toStrictEqual({ ...(parsed(frame, v) as Packet) });
      }),
      { numRuns: propertyRuns(1000) },
    );
  });

  it('agrees with mqtt-packet on any bytes after a PUBLISH header: what it reads, the parser reads the same', () => {
    // Bytes with many zeros (a property list's length, a topic length's high byte), and a topic
    // length that fits now and then.
    const byte = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 255 }));
    const body = fc
      .oneof(
        fc.array(byte, { maxLength: 40 }),
        fc.tuple(fc.integer({ min: 0, max: 12 }), fc.array(byte, { maxLength: 30 })).map(([length, rest]) => [0, length, ...rest]),
      )
      .map((bytes) => Uint8Array.from(bytes));
    let read = 0;
    const runs = propertyRuns(3000);
    fc.assert(
      fc.property(fc.integer({ min: 0x30, max: 0x3f }), body, version, (type, body, v) => {
        const frame = frameOf(type, body);
        const fast = readPublishFrame(frame, v);
        if (fast === undefined) return;
        read += 1;
        const slow = parsed(frame, v);
        expect(slow).not.toBeInstanceOf(Error);
        expect({ ...fast }).toStrictEqual({ ...(slow as Packet) });
      }),
      { numRuns: runs },
    );
    // Random bytes make a readable PUBLISH often enough for the comparison to mean something (a
    // quarter of the runs, about).
    expect(read).toBeGreaterThan(runs / 6);
  });

  it('leaves every other packet to the parser', () => {
    for (const packet of [
      { cmd: 'pingreq' },
      { cmd: 'pubrel', messageId: 7 },
      { cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'a', qos: 0 }] },
      { cmd: 'disconnect' },
    ] as Packet[]) {
      expect(readPublishFrame(generate(packet), 4)).toBeUndefined();
    }
    // QoS 3 is malformed: the parser says so.
    expect(readPublishFrame(frameOf(0x36, Buffer.from([0, 1, 0x61, 0, 1])), 4)).toBeUndefined();
  });
});
