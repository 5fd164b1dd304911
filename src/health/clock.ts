import { existsSync } from 'node:fs';

const TIMESYNC_DIR = '/run/systemd/timesync';

/**
 * Whether the system clock has been synchronised since boot, as systemd-timesyncd records it:
 * true or false under timesyncd, null where that cannot be known. Boards without a real-time clock
 * start with a wrong time; readings sent without one get the receive time, so this tells whether
 * those times can be trusted.
 */
export function clockSynchronized(dir = TIMESYNC_DIR): boolean | null {
  if (existsSync(`${dir}/synchronized`)) return true;
  return existsSync(dir) ? false : null;
}
