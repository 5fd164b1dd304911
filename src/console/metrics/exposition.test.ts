import { describe, expect, it } from 'vitest';
import { Exposition } from './exposition.js';

describe('exposition', () => {
  it('escapes label values and help text, writes special values, and leaves out families without samples', () => {
    const text = new Exposition()
      .family('a_total', 'counter', 'Line one\nline two \\ end', [[{ key: 'say "hi"\\\n' }, 1]])
      .family('empty', 'gauge', 'none', [])
      .one('b', 'gauge', 'x', Number.NaN)
      .one('c', 'gauge', 'x', Infinity)
      .text();
    expect(text).toBe(
      [
        '# HELP a_total Line one\\nline two \\\\ end',
        '# TYPE a_total counter',
        'a_total{key="say \\"hi\\"\\\\\\n"} 1',
        '# HELP b x',
        '# TYPE b gauge',
        'b NaN',
        '# HELP c x',
        '# TYPE c gauge',
        'c +Inf',
        '',
      ].join('\n'),
    );
  });
});
