import { describe, expect, it } from 'vitest';
import { boundSummaries, RuleBook, SUMMARY_FIELDS } from './thinning-rules.js';

describe('thinning rules', () => {
  it('summarise only cargo ids whose derived ids stay within MAX_ID_LENGTH; a longer one goes to the next rule or whole', () => {
    const maxIdLength = 20;
    const book = new RuleBook(
      boundSummaries(
        [
          { match: '*_rpm', summaryMs: 60_000, latenessMs: 0 },
          { match: 'long*', deadband: 1 },
        ],
        maxIdLength,
      ),
    );
    const longest = (id: string) => Math.max(...SUMMARY_FIELDS.map((field) => [...`${id}:${field}`].length));
    // 14 characters: `pump_motor_rpm:count` is 20.
    expect(book.ruleFor('pump_motor_rpm')).toMatchObject({ summaryMs: 60_000 });
    expect(longest('pump_motor_rpm')).toBe(maxIdLength);
    // One more: its `:count` would be refused, so no summary.
    expect(book.ruleFor('pump_motor1_rpm')).toBeUndefined();
    expect(book.ruleFor('long_pump_motor_rpm')).toMatchObject({ deadband: 1 });
    // Characters, not bytes: 14 of them, 3 bytes each.
    expect(book.ruleFor('ポンプモーター回転数_rpm')).toMatchObject({ summaryMs: 60_000 });
  });
});
