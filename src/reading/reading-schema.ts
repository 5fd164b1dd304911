import * as z from 'zod';
import type { TimeWindow } from './time-window.js';
import { parseTimestampNs } from './timestamp.js';

export interface ReadingLimits {
  /** Longest ship_id / cargo_id in Unicode code points. */
  maxIdLength: number;
  /** The times accepted now; without it, every time QuestDB can store (1970 to 2261). */
  window?: TimeWindow;
}

/** A validated reading; `timeNs` is epoch nanoseconds as a decimal string, absent when the device sent none. */
export interface Reading {
  timeNs: string | undefined;
  shipId: string;
  cargoId: string;
  value: number;
}

// C0, DEL and C1 controls: they break logs, CSV exports and dashboards, and no device id needs them.
const CONTROL = /\p{Cc}/u;

function codePointLength(text: string): number {
  let length = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      length--;
      i++;
    }
  }
  return length;
}

function identifier(limits: ReadingLimits) {
  const problem = (ctx: z.RefinementCtx, type: string, message: string) => ctx.addIssue({ code: 'custom', message, params: { type } });
  return z.string().superRefine((id, ctx) => {
    if (id.length === 0) {
      problem(ctx, 'string_too_short', 'String should have at least 1 character');
    } else if (codePointLength(id) > limits.maxIdLength) {
      problem(ctx, 'string_too_long', `String should have at most ${limits.maxIdLength} characters`);
    } else if (CONTROL.test(id)) {
      problem(ctx, 'string_control_character', 'String must not contain control characters');
    } else if (!id.isWellFormed()) {
      problem(ctx, 'string_unicode', 'String must be well-formed Unicode (no lone surrogate escapes)');
    }
  });
}

function time(limits: ReadingLimits) {
  return z
    .union([z.string(), z.null()])
    .optional()
    .transform((text, ctx) => {
      if (text === null || text === undefined) return undefined;
      const parsed = parseTimestampNs(text, limits.window);
      if (typeof parsed === 'string') return parsed;
      ctx.addIssue({ code: 'custom', message: parsed.msg, params: { type: parsed.type } });
      return z.NEVER;
    });
}

// zod refuses NaN and ±Infinity; JSON.parse turns 1e400 into Infinity.
const value = z.number();

/**
 * The schema of record for one reading. Unknown fields are ignored; a missing or null `time`
 * means "use the receive time".
 */
export function readingSchema(limits: ReadingLimits) {
  const id = identifier(limits);
  return z
    .object({ time: time(limits), ship_id: id, cargo_id: id, value })
    .transform((r): Reading => ({ timeNs: r.time, shipId: r.ship_id, cargoId: r.cargo_id, value: r.value }));
}

export type ReadingSchema = ReturnType<typeof readingSchema>;
