import type { DailyWindow } from '../config/daily-windows.js';

// Apart from the settings' parsing (config/daily-windows.ts): the delivery thread loads no config code.

const DAY_MINUTES = 24 * 60;

const minuteOfDay = (at: Date): number => at.getHours() * 60 + at.getMinutes() + at.getSeconds() / 60 + at.getMilliseconds() / 60_000;

const inside = (window: DailyWindow, minute: number): boolean =>
  window.start < window.end ? minute >= window.start && minute < window.end : minute >= window.start || minute < window.end;

/** Whether `at` (local time) falls in one of the windows. */
export const withinWindows = (windows: readonly DailyWindow[], at: Date): boolean => {
  const minute = minuteOfDay(at);
  return windows.some((window) => inside(window, minute));
};

/** Milliseconds from `at` until the next window starts (0 inside one; Infinity without any). */
export function msUntilWindow(windows: readonly DailyWindow[], at: Date): number {
  if (withinWindows(windows, at)) return 0;
  const minute = minuteOfDay(at);
  let soonest = Number.POSITIVE_INFINITY;
  for (const { start } of windows) soonest = Math.min(soonest, (start - minute + DAY_MINUTES) % DAY_MINUTES);
  return Math.ceil(soonest * 60_000);
}
