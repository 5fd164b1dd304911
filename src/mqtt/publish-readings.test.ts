import fc from 'fast-check';
import { propertyRuns } from '../../test/support/property-sizes.js';
import { describe, expect, it } from 'vitest';
import { readingSchema } from '../reading/reading-schema.js';
import { readingsOfPublish, TOPIC_PREFIX } from './publish-readings.js';

const limits = { maxIdLength: 100 };
const validator = { schema: readingSchema(limits), limits };

describe('readingsOfPublish', () => {
  it('takes a reading topic as harbor/v1/{ship_id}/{cargo_id}, exactly two ids after the prefix, and refuses any other topic', () => {
    // Short segments from a small alphabet, so slashes, empty ids and the prefix itself come up often.
    const segment = fc.string({ unit: fc.constantFrom('a', 'b', '/', ' ', 'é'), maxLength: 4 });
    const topic = fc.oneof(
      fc.array(segment, { maxLength: 4 }).map((parts) => TOPIC_PREFIX + parts.join('/')),
      fc.array(segment, { maxLength: 4 }).map((parts) => parts.join('/')),
    );
    fc.assert(
      fc.property(topic, (t) => {
        const result = readingsOfPublish(t, Buffer.from('21.5'), validator, 1000);
        // The rule as splitting says it.
        const ids = t.startsWith(TOPIC_PREFIX) ? t.slice(TOPIC_PREFIX.length).split('/') : [];
        if (ids.length !== 2) {
          expect(result).toMatchObject({ ok: false, refusal: 'topic', details: [{ loc: ['topic'], type: 'topic_unknown' }] });
          return;
        }
        const [shipId, cargoId] = ids as [string, string];
        if (result.ok) {
          expect(result.readings).toEqual([{ timeNs: undefined, shipId, cargoId, value: 21.5 }]);
        } else {
          // An empty or blank id: the schema refuses it, located in the topic.
          expect(result.refusal).toBe('invalid');
          expect(result.details.every((d) => d.loc[0] === 'topic')).toBe(true);
        }
      }),
      { numRuns: propertyRuns(3000) },
    );
  });
});
