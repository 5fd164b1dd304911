import { describe, expect, it } from 'vitest';
import { MAX_REASON_LENGTH, corruptRecordLetter, reasonText } from './dead-letter-reason.js';
import { RecordCorruptError } from '../queue/record-codec.js';

describe('a dead letter reason', () => {
  it('puts a message of many lines on one, without surrounding blanks', () => {
    expect(reasonText('  broker said:\r\n  no\n\nleader \n')).toBe('broker said: no leader');
  });

  it('keeps at most MAX_REASON_LENGTH characters and marks the cut', () => {
    const reason = reasonText('x'.repeat(MAX_REASON_LENGTH + 5));
    expect(reason).toBe(`${'x'.repeat(MAX_REASON_LENGTH)}…`);
  });

  it('makes a corrupt record one dead letter holding the whole record', () => {
    const record = { segment: 1, id: 7, receivedMs: 1234, readings: 1, bytes: 7, payload: 'garbage' };
    expect(corruptRecordLetter(record, new RecordCorruptError('line 1 has 1 field'))).toEqual({
      receivedMs: 1234,
      reason: 'corrupt queue record: line 1 has 1 field',
      line: 'garbage',
    });
  });
});
