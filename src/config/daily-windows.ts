/** A stretch of each day, in minutes after local midnight; `end` before `start` runs past midnight. */
export interface DailyWindow {
  start: number;
  end: number;
}

const TIME = /^([01]\d|2[0-3]):([0-5]\d)$/;

/**
 * `22:00-06:00` or `00:00-06:00,12:00-13:30`: times of day on the gateway's local clock. Returns
 * the windows, or the words of what is wrong.
 */
export function parseDailyWindows(text: string): DailyWindow[] | string {
  const windows: DailyWindow[] = [];
  for (const part of text.split(',').map((p) => p.trim())) {
    const [from, to, ...rest] = part.split('-').map((t) => t.trim());
    const start = minutesOf(from);
    const end = minutesOf(to);
    if (rest.length > 0 || start === undefined || end === undefined)
      return `"${part}" is not a stretch of the day as HH:MM-HH:MM (22:00-06:00)`;
    if (start === end) return `"${part}" starts where it ends; leave the setting empty for no budget hours at all`;
    windows.push({ start, end });
  }
  return windows;
}

/** The windows as the setting writes them. */
export const formatDailyWindows = (windows: readonly DailyWindow[]): string =>
  windows.map((w) => `${hhmm(w.start)}-${hhmm(w.end)}`).join(',');

const hhmm = (minutes: number): string => `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;

function minutesOf(time: string | undefined): number | undefined {
  const found = time === undefined ? null : TIME.exec(time);
  return found === null ? undefined : Number(found[1]) * 60 + Number(found[2]);
}
