import { isUtf8 } from 'node:buffer';
import type { Logger } from 'pino';
import type { KeyCounterTable } from '../keys/key-counters.js';
import type { Principal } from '../keys/key-store.js';
import { foreignShips } from '../keys/ship-prefix.js';
import type { IngestDeadLetters } from '../queue/dead-letters.js';
import { classifyWriteError, type QueueRefusal } from '../queue/queue-errors.js';
import type { AppendListener, QueueWriter, SideWrite } from '../queue/queue-writer.js';
import { encodeRecord } from '../queue/record-codec.js';
import type { Loc, ReadingIssue } from '../reading/reading-issues.js';
import type { Reading } from '../reading/reading-schema.js';
import type { ReceiveClock } from '../reading/receive-clock.js';
import type { GatewayStats } from '../stats.js';

/** What became of a message's readings. */
export type IngestOutcome =
  | { status: 'stored'; readings: number }
  /** Nothing numeric in it (a subscription's "ON", "nan"): acknowledged, nothing stored. */
  | { status: 'empty' }
  /** Its content is refused for good: the sender is told (MQTT 5) or it becomes a dead letter. */
  | { status: 'refused'; kind: RefusalKind; message: string; details: ReadingIssue[]; readings?: Reading[] }
  /** The queue cannot take it now: not acknowledged, so the sender sends it again. */
  | { status: 'unavailable'; refusal: QueueRefusal; message: string };

export type RefusalKind = 'malformed' | 'invalid' | 'topic' | 'forbidden';

/** Told once what became of a message's readings (`MqttIngest.storeTo`); must not throw. */
export interface StoreListener {
  stored(outcome: IngestOutcome): void;
}

export interface MqttIngestDeps {
  queue: QueueWriter;
  clock: ReceiveClock;
  stats: GatewayStats;
  keys: { counters: KeyCounterTable };
  deadLetters: IngestDeadLetters;
  logger: Logger;
  /** Told of every committed message's readings, as HTTP ingest tells it (the console's ship table). */
  accepted?: (principal: Principal, record: string, readings: number) => void;
}

const EMPTY: IngestOutcome = { status: 'empty' };

/** One message's readings waiting for their commit: counted once committed, then its listener told. */
class PendingStore implements AppendListener {
  constructor(
    readonly deps: MqttIngestDeps,
    readonly listener: StoreListener,
    readonly principal: Principal,
    readonly record: string,
    readonly readings: number,
  ) {}

  appended(error: Error | undefined): void {
    const { deps, principal, readings } = this;
    if (error !== undefined) {
      const refused = classifyWriteError(error);
      if (refused.refusal !== 'full' && refused.refusal !== 'closed') {
        deps.logger.error({ event: 'queue_write_failed', refusal: refused.refusal, err: refused.cause }, refused.message);
      }
      this.listener.stored({ status: 'unavailable', refusal: refused.refusal, message: refused.message });
      return;
    }
    deps.stats.acceptedReadings += readings;
    deps.keys.counters.accepted(principal.name, readings);
    deps.accepted?.(principal, this.record, readings);
    this.listener.stored({ status: 'stored', readings });
  }
}

/**
 * The one way MQTT messages reach the queue, for both forms (devices publishing to the gateway, the
 * gateway subscribed to a site broker): the ship prefix of the key, one queue record per message
 * as an HTTP request makes one, the counters; refusals that cannot be told become dead letters.
 */
export class MqttIngest {
  constructor(private readonly deps: MqttIngestDeps) {}

  /**
   * Commits the readings (and `side` in their transaction); settles once they are on disk (fsynced
   * in power-loss mode) or refused.
   */
  store(principal: Principal, readings: Reading[], shipLoc: (index: number) => Loc, side?: SideWrite): Promise<IngestOutcome> {
    return new Promise((resolve) => this.storeTo({ stored: resolve }, principal, readings, shipLoc, side));
  }

  /**
   * As `store`, telling `listener` instead of settling a promise: a device session keeps hundreds of
   * publishes in flight, and each costs one object here instead of a chain of promises. An outcome
   * known at once (nothing to store, a foreign ship, a refusing queue) is told before this returns.
   */
  storeTo(listener: StoreListener, principal: Principal, readings: Reading[], shipLoc: (index: number) => Loc, side?: SideWrite): void {
    if (readings.length === 0) {
      listener.stored(EMPTY);
      return;
    }
    const foreign = foreignShips(principal, readings, shipLoc);
    if (foreign !== undefined) {
      listener.stored({ status: 'refused', kind: 'forbidden', ...foreign, readings });
      return;
    }
    // As over HTTP, encoded before the commit's wait, so what waits is the record, not the readings.
    const record = encodeRecord(readings, this.deps.clock);
    const pending = new PendingStore(this.deps, listener, principal, record, readings.length);
    // As over HTTP: received at the clock's newest millisecond, from the site the key is bound to.
    this.deps.queue.appendTo(pending, record, readings.length, this.deps.clock.receivedMs(), principal.site, side);
  }

  /**
   * Keeps a refused message as a dead letter under `source` with its reason: its readings as record
   * lines when they were valid (an operator may re-queue them), else the payload as received.
   * Rejects (QueueRefusedError) when it cannot be kept: the message must then not be acknowledged.
   * `side` is committed with the letter.
   */
  async deadLetter(
    source: string,
    refused: IngestOutcome & { status: 'refused' },
    context: { key: string; topic: string; payload: Buffer; receivedMs: number },
    side?: SideWrite,
  ): Promise<void> {
    const first = refused.details[0];
    const reason =
      `refused at MQTT ingest (key ${JSON.stringify(context.key)}, topic ${JSON.stringify(context.topic.slice(0, 200))}): ${refused.message}` +
      (first === undefined ? '' : `: ${first.loc.join('.')}: ${first.msg}`);
    const line =
      refused.readings !== undefined
        ? encodeRecord(refused.readings, this.deps.clock)
        : isUtf8(context.payload)
          ? context.payload.toString('utf8')
          : `base64:${context.payload.toString('base64')}`;
    await this.deps.deadLetters.add({ receivedMs: context.receivedMs, source, reason, line }, side);
  }
}
