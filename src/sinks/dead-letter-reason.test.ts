import { describe, expect, it } from 'vitest';
import { MAX_REASON_LENGTH, corruptRecordLetter, questDbRowReason, reasonText } from './dead-letter-reason.js';
import { RecordCorruptError } from '../queue/record-codec.js';

describe('a dead letter reason', () => {
  it('puts a message of many lines on one, without surrounding blanks', () => {
    expect(reasonText('  broker said:\r\n  no\n\nleader \n')).toBe('broker said: no leader');
  });

  it('keeps at most MAX_REASON_LENGTH characters and marks the cut', () => {
    const reason = reasonText('x'.repeat(MAX_REASON_LENGTH + 5));
    expect(reason).toBe(`${'x'.repeat(MAX_REASON_LENGTH)}…`);
  });

  it("gives a row QuestDB refused QuestDB's cause, without the protocol's preamble", () => {
    expect(
      questDbRowReason(
        'failed to parse line protocol:errors encountered on line(s):\nerror in line 1: Could not parse timestamp: 9999999999999999999',
      ),
    ).toBe('QuestDB refused the reading: Could not parse timestamp: 9999999999999999999');
    expect(questDbRowReason('cast error for line 1')).toBe('QuestDB refused the reading: cast error for line 1');
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
