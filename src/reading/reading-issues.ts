import type { z } from 'zod';

/** Where in the request a problem is: e.g. ["body", 3, "value"]. */
export type Loc = (string | number)[];

/** What is wrong with a reading: where (`loc`), what (`msg`) and a stable machine-readable `type`. */
export interface ReadingIssue {
  loc: Loc;
  msg: string;
  type: string;
}

const kind = (input: unknown): string => (input === null ? 'null' : Array.isArray(input) ? 'array' : typeof input);

/**
 * Turns zod issues (parsed with `reportInput: true`) into issues whose `loc` starts with
 * `prefix`, e.g. ["body", 3, "value"] for the fourth reading of a batch.
 */
export function toReadingIssues(issues: readonly z.core.$ZodIssue[], prefix: (string | number)[]): ReadingIssue[] {
  return issues.map((issue) => {
    const loc = [...prefix, ...issue.path.map((key) => (typeof key === 'symbol' ? String(key) : key))];
    const input = (issue as { input?: unknown }).input;
    switch (issue.code) {
      case 'custom':
        return { loc, msg: issue.message, type: String(issue.params?.['type'] ?? 'value_error') };
      case 'invalid_type':
        if (input === undefined) return { loc, msg: 'Field required', type: 'missing' };
        if (issue.expected === 'number' && typeof input === 'number') {
          return { loc, msg: 'Input should be a finite number', type: 'finite_number' };
        }
        if (issue.expected === 'object') {
          return { loc, msg: `Reading should be a JSON object, not ${kind(input)}`, type: 'object_type' };
        }
        return { loc, msg: `Input should be a ${issue.expected}, not ${kind(input)}`, type: `${issue.expected}_type` };
      case 'invalid_union':
        return { loc, msg: `Input should be a timestamp string, not ${kind(input)}`, type: 'datetime_type' };
      default:
        return { loc, msg: issue.message, type: 'value_error' };
    }
  });
}
