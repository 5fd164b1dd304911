import { LOCAL_SINK } from '../stats.js';
import { BEHIND_AFTER_SECONDS, withinInterval } from './sink-health.js';
import { queueHolder, type GatewaySnapshot, type SinkSnapshot } from './snapshot.js';

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
/** A failure of the table check: QuestDB answers, its table needs an operator (see QuestDbTarget). */
const TABLE_AT_FAULT = /^table \S+ is not the table the gateway set up|^table setup failed: table /;
/** A clock this far off a destination's is worth saying: beyond two clocks' drift and a round trip. */
const CLOCK_OFF_WORTH_SAYING_SECONDS = 60;
// A failure whose message says no answer came: the destination is unreachable, not refusing.
const UNREACHABLE = /unreachable|did not answer|no acknowledgement|not answer|ECONN|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|timed? ?out/i;

/** A sink as the words name it: what it is, and where, when the destination has a host. */
export function sinkLabel(sink: Pick<SinkSnapshot, 'name' | 'destination'>): string {
  const kind: Record<string, string> = { questdb: 'QuestDB', 'remote-questdb': 'remote QuestDB', upstream: 'upstream', kafka: 'Kafka' };
  const label = kind[sink.name] ?? sink.name;
  if (sink.name === LOCAL_SINK) return label;
  const host = /^https?:\/\/([^/\s]+)/.exec(sink.destination)?.[1] ?? /^Kafka ([^,\s]+)/.exec(sink.destination)?.[1];
  return host === undefined ? label : `${label} ${host}`;
}

/** A delivery held because the destination gives this site to another gateway (the upstream sink's and the remote QuestDB sink's words). */
const SITE_HELD = /^the (?:centre|remote QuestDB) gives site (".*?") to another gateway/;

/** What is wrong with a sink, in words: failing or silent for how long; undefined when nothing is. */
export function sinkTrouble(sink: SinkSnapshot): string | undefined {
  const held = SITE_HELD.exec(sink.lastError?.message ?? '');
  if (sink.consecutiveFailures > 0 && held !== null) {
    return `${sinkLabel(sink)} holds readings: site ${held[1]} belongs to another gateway there (rename this one, or release the claim)`;
  }
  if (sink.consecutiveFailures > 0 && sink.failingSeconds !== null) {
    const how = UNREACHABLE.test(sink.lastError?.message ?? '') ? 'unreachable' : 'failing';
    return `${sinkLabel(sink)} ${how} for ${formatDuration(sink.failingSeconds)}`;
  }
  if (sink.waitingSeconds !== null) return `${sinkLabel(sink)} not answering for ${formatDuration(sink.waitingSeconds)}`;
  return undefined;
}

/** "clock 2 h ahead of Kafka 10.0.0.5:9092" for each destination that told the site its clock is off. */
function clockNotes(sinks: readonly SinkSnapshot[]): string[] {
  return sinks
    .filter((s) => s.clockAheadSeconds !== null && Math.abs(s.clockAheadSeconds) >= CLOCK_OFF_WORTH_SAYING_SECONDS)
    .map(
      (s) => `clock ${formatDuration(Math.abs(s.clockAheadSeconds!))} ${s.clockAheadSeconds! > 0 ? 'ahead of' : 'behind'} ${sinkLabel(s)}`,
    );
}

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
 * flushes (the local QuestDB's) began (epoch ms), known to the caller that watches successive
 * snapshots; every other sink says how long it has failed itself.
 */
export function describeGatewayState(snapshot: GatewaySnapshot, outageSince: number | undefined, now: number): GatewayState {
  const outageSeconds =
    snapshot.flush.consecutiveFailures > 0 && outageSince !== undefined ? Math.max(0, (now - outageSince) / 1000) : null;
  const fill = snapshot.queue.maxBytes > 0 ? snapshot.queue.bytes / snapshot.queue.maxBytes : 0;
  const oldest = snapshot.queue.oldestAgeSeconds;
  // The flush figures are the local QuestDB's, or the first sink's when there is none.
  const flushSink = snapshot.sinks.find((s) => s.name === LOCAL_SINK) ?? snapshot.sinks[0];
  const tableAtFault = TABLE_AT_FAULT.test(snapshot.flush.lastError?.message ?? '');
  const flushTrouble =
    outageSeconds === null
      ? undefined
      : tableAtFault
        ? `the QuestDB table needs an operator for ${formatDuration(outageSeconds)}`
        : `${flushSink === undefined ? 'QuestDB' : sinkLabel(flushSink)} unreachable for ${formatDuration(outageSeconds)}`;
  const troubles = new Map<string, string>();
  for (const sink of snapshot.sinks) {
    const trouble = sink === flushSink ? (flushTrouble ?? sinkTrouble(sink)) : sinkTrouble(sink);
    if (trouble !== undefined) troubles.set(sink.name, trouble);
  }
  if (flushSink === undefined && flushTrouble !== undefined) troubles.set(LOCAL_SINK, flushTrouble);

  let code: GatewayStateCode;
  let headline: string;
  if (!snapshot.ready) {
    code = 'refusing';
    if (fill >= QUEUE_FULL) {
      // The sink that holds the queue, and why: what an operator has to bring back.
      const holder = snapshot.queue.heldBy ?? queueHolder(snapshot.sinks)?.name;
      const holderSink = snapshot.sinks.find((s) => s.name === holder);
      const why =
        holder === undefined
          ? (troubles.get(LOCAL_SINK) ?? [...troubles.values()][0])
          : (troubles.get(holder) ?? (holderSink === undefined ? undefined : `${sinkLabel(holderSink)} behind`));
      headline = `refusing readings — ${why === undefined ? '' : `${why}, `}queue full`;
    } else {
      headline = 'refusing readings — stopping, or queue disk failing';
    }
  } else if (troubles.size > 0) {
    code = 'buffering';
    headline = `buffering — ${[...troubles.values()].join('; ')}`;
  } else if (
    // A backlog older than a minute, beyond what the sinks' own intervals hold by design.
    oldest !== null &&
    oldest > BEHIND_AFTER_SECONDS &&
    !(snapshot.sinks.length > 0 && snapshot.sinks.every(withinInterval))
  ) {
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
  for (const conflict of snapshot.siteClaims?.conflicts ?? []) {
    notes.push(`site ${JSON.stringify(conflict.site)} forwarded by two gateways (instance ${conflict.claimant.instance} refused)`);
  }
  notes.push(...clockNotes(snapshot.sinks));
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
