import { describe, expect, it } from 'vitest';
import { BrokerClock } from './broker-clock.js';
import { brokerNowOf, classifyFailure } from './kafka-failure.js';
import { ProtocolError, ResponseError } from '../../../test/support/kafka-client.js';

const HOUR = 3_600_000;

describe("the broker's clock as a refusal of message times tells it", () => {
  it('reads it from the range the broker takes: its lower end when the past is unbounded (the default), else the upper end less an hour', () => {
    const now = 1_795_683_502_494;
    expect(
      brokerNowOf(
        `Timestamp 1 of message with offset 0 is out of range. The timestamp should be within [${BigInt(now) - 9_223_372_036_854_775_807n}, ${now + HOUR}]`,
      ),
    ).toBe(now);
    expect(brokerNowOf(`… should be within [${now - HOUR}, ${now + HOUR}]`)).toBe(now);
    expect(brokerNowOf('no range here')).toBeUndefined();
  });

  it('classifies the refusal as the clock, not the content: never a dead letter', () => {
    const refusal = new ResponseError(
      0,
      11,
      { '/responses/0/partition_responses/0': 32 },
      {
        responses: [
          {
            partitionResponses: [
              {
                recordErrors: [
                  {
                    batchIndex: 0,
                    batchIndexErrorMessage: `Timestamp 9 … should be within [${1000n - 9_223_372_036_854_775_807n}, ${1000 + HOUR}]`,
                  },
                ],
              },
            ],
          },
        ],
      },
    );
    expect(classifyFailure(refusal)).toEqual({
      kind: 'clock',
      message: expect.stringMatching(/^INVALID_TIMESTAMP: Timestamp 9/),
      brokerNowMs: 1000,
    });
    expect(classifyFailure(new ProtocolError('INVALID_TIMESTAMP'))).toMatchObject({
      kind: 'clock',
      message: expect.stringMatching(/^INVALID_TIMESTAMP/),
    });
  });

  it('stamps on the broker clock once told, and forgets the shift when the site clock steps', () => {
    let wall = 10 * HOUR;
    const clock = new BrokerClock(() => wall);
    expect(clock.brokerNow()).toBe(10 * HOUR);
    expect(clock.aheadMs()).toBeUndefined();
    expect(clock.learn(8 * HOUR)).toBe(true);
    expect(clock.aheadMs()).toBe(2 * HOUR);
    expect(clock.brokerNow()).toBe(8 * HOUR);
    // What it tells again is nothing new: the refusal has another cause.
    expect(clock.learn(8 * HOUR + 200)).toBe(false);
    // NTP sets the site's clock right: the wall clock jumps 2 h back, the monotonic one does not.
    wall = 8 * HOUR;
    expect(clock.brokerNow()).toBe(8 * HOUR);
    expect(clock.aheadMs()).toBeUndefined();
  });
});
