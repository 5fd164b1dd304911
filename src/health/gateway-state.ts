import type { GatewaySnapshot } from './snapshot.js';

/** The gateway's condition as one word for alerts and filters, and as a sentence for the dashboard. */
export type GatewayStateCode = 'delivering' | 'catching_up' | 'buffering' | 'refusing' | 'stopped';

export interface GatewayState {
  code: GatewayStateCode;
  text: string;
  /** Seconds the flushes have failed without a success in between; null while they succeed. */
  outageSeconds: number | null;
}

/** From this fill on the sentence names how full the queue is: early enough to act before it refuses readings. */
const QUEUE_FILL_WORTH_SAYING = 0.5;
/** A refusing queue this full refused for size (a request larger than the room left); otherwise it is stopping or its disk failed. */
const QUEUE_FULL = 0.9;
/** A backlog whose oldest reading is older than this is named "catching up" rather than "delivering". */
const CATCHING_UP_AFTER_SECONDS = 60;

/** "45 s", "12 min", "3 h 5 min": the units a manager reads at a glance. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} d`;
}

/**
 * Names the gateway's state from one snapshot. `outageSince` is when the current run of failed
 * flushes began (epoch ms), known to the caller that watches successive snapshots.
 */
export function describeGatewayState(snapshot: GatewaySnapshot, outageSince: number | undefined, now: number): GatewayState {
  const outageSeconds =
    snapshot.flush.consecutiveFailures > 0 && outageSince !== undefined ? Math.max(0, (now - outageSince) / 1000) : null;
  const fill = snapshot.queue.maxBytes > 0 ? snapshot.queue.bytes / snapshot.queue.maxBytes : 0;
  const oldest = snapshot.queue.oldestAgeSeconds;

  let code: GatewayStateCode;
  let headline: string;
  if (!snapshot.ready) {
    code = 'refusing';
    headline = fill >= QUEUE_FULL ? 'refusing readings — queue full' : 'refusing readings — stopping, or queue disk failing';
  } else if (outageSeconds !== null) {
    code = 'buffering';
    headline = `buffering — QuestDB unreachable for ${formatDuration(outageSeconds)}`;
  } else if (oldest !== null && oldest > CATCHING_UP_AFTER_SECONDS) {
    code = 'catching_up';
    headline = `catching up — oldest queued reading ${formatDuration(oldest)} old`;
  } else {
    code = 'delivering';
    headline = 'delivering';
  }

  const notes: string[] = [];
  if (!(code === 'refusing' && fill >= QUEUE_FULL) && fill >= QUEUE_FILL_WORTH_SAYING) notes.push(`queue ${Math.floor(fill * 100)} % full`);
  if (snapshot.deadLetters > 0) notes.push(`${snapshot.deadLetters} dead ${snapshot.deadLetters === 1 ? 'letter' : 'letters'}`);
  if (snapshot.clockSynchronized === false) notes.push('clock not synchronised');
  return { code, text: [headline, ...notes].join(', '), outageSeconds };
}

/** The state of a gateway's last row: stopped, why, and what it leaves queued for its next start. */
export function describeStop(snapshot: GatewaySnapshot, why: string): GatewayState {
  const queued = snapshot.queue.readings;
  const left = queued === 0 ? '' : `, ${queued} ${queued === 1 ? 'reading' : 'readings'} queued for the next start`;
  return { code: 'stopped', text: `stopped — ${why}${left}`, outageSeconds: null };
}

/** Remembers when the current run of failed flushes began, across the snapshots of successive reports. */
export class OutageWatch {
  #since: number | undefined;

  observe(snapshot: GatewaySnapshot, now: number): number | undefined {
    if (snapshot.flush.consecutiveFailures === 0) this.#since = undefined;
    else this.#since ??= failureStart(snapshot, now);
    return this.#since;
  }
}

/** The first failure of a run is not kept: the latest error when a run is first seen is at most one report later. */
function failureStart(snapshot: GatewaySnapshot, now: number): number {
  const at = snapshot.flush.lastError === null ? Number.NaN : Date.parse(snapshot.flush.lastError.at);
  return Number.isNaN(at) ? now : Math.min(at, now);
}
