import fc from 'fast-check';
import { propertyRuns } from '../../test/support/property-sizes.js';
import { generate } from 'mqtt-packet';
import { describe, expect, it } from 'vitest';
import { ackSize, writeAck } from './publish-acks.js';
import { REASON } from './reason-codes.js';

describe('writeAck', () => {
  it('writes PUBACK and PUBREC byte for byte as mqtt-packet generates them, several into one buffer', () => {
    const ack = fc.record({
      qos: fc.constantFrom(1 as const, 2 as const),
      messageId: fc.integer({ min: 0, max: 65_535 }),
      reason: fc.constantFrom(...Object.values(REASON)),
    });
    fc.assert(
      fc.property(fc.constantFrom(4, 5), fc.array(ack, { minLength: 1, maxLength: 5 }), (version, acks) => {
        const size = ackSize(version);
        const bytes = Buffer.alloc(acks.length * size, 0xff);
        acks.forEach((a, i) => {
          writeAck(bytes, i * size, a.qos, a.messageId, version, a.reason);
        });
        const expected = acks.map((a) =>
          generate(
            {
              cmd: a.qos === 1 ? 'puback' : 'pubrec',
              messageId: a.messageId,
              // What a session sends: MQTT 5's reason code when it is not success.
              ...(version === 5 && a.reason !== REASON.success ? { reasonCode: a.reason } : {}),
            },
            { protocolVersion: version },
          ),
        );
        expect(bytes).toEqual(Buffer.concat(expected));
      }),
      { numRuns: propertyRuns(500) },
    );
  });
});
