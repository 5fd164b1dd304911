import { createHash } from 'node:crypto';
import type { QueueWriter, SideWrite } from '../../queue/queue-writer.js';
import type { BrokerMessage } from './broker-client.js';

/**
 * Made at the subscription's start, not by a format step (queue-format.ts): an older release opening
 * the file passes a table it does not know by, so no format version is spent on it.
 */
const CREATE = `CREATE TABLE IF NOT EXISTS mqtt_received (
  session   TEXT    NOT NULL,
  packet_id INTEGER NOT NULL,
  digest    TEXT    NOT NULL,
  released  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (session, packet_id)
) WITHOUT ROWID`;
const MARK = 'INSERT OR REPLACE INTO mqtt_received (session, packet_id, digest, released) VALUES (?, ?, ?, 0)';
const RELEASE = 'UPDATE mqtt_received SET released = 1 WHERE session = ? AND packet_id = ?';
const FORGET_RELEASED = 'DELETE FROM mqtt_received WHERE session = ? AND released = 1';
const FORGET = 'DELETE FROM mqtt_received WHERE session = ?';

interface Taken {
  digest: string;
  /** In the queue file (the message left readings or a dead letter there). */
  durable: boolean;
  /** The broker sent its PUBREL and got its PUBCOMP. */
  released: boolean;
}

/** A message's identity beside its packet id: its topic and payload. */
const digestOf = (message: BrokerMessage): string =>
  createHash('sha256').update(message.topic).update('\0').update(message.payload).digest('base64url').slice(0, 22);

/**
 * The QoS 2 messages of one broker session the gateway took: their packet ids and what they held. A
 * message that left something in the queue file (readings, a dead letter) has its id committed in
 * the same transaction, before its PUBREC, so the id survives whatever took the PUBREC (kill -9, a
 * power cut in `power-loss` mode, a restart of the broker): the PUBLISH the broker sends again (DUP
 * set, the same id, the same topic and payload) is acknowledged without being stored.
 *
 * At the PUBREL the id is marked released, durably, before the PUBCOMP. It is kept a little longer:
 * a broker that restarts before it reads the PUBCOMP must send the PUBREL again, but Mosquitto sends
 * the PUBLISH again instead (with DUP). Released ids are forgotten at the first PUBLISH without DUP:
 * the broker sends those only once it sent again all it had in flight, and uses an id again only
 * after its PUBCOMP. A message that left nothing (retained, without a number) is remembered in
 * memory only: sent again after a restart it leaves nothing again.
 */
export class ReceivedPackets {
  readonly #taken = new Map<number, Taken>();
  #released = 0;

  private constructor(
    private readonly queue: QueueWriter,
    /** The broker and client id: a session's packet ids mean nothing in another's. */
    private readonly session: string,
  ) {}

  static open(queue: QueueWriter, session: string): ReceivedPackets {
    const received = new ReceivedPackets(queue, session);
    queue.run(CREATE);
    const rows = queue.run<{ packet_id: number; digest: string; released: number }>(
      'SELECT packet_id, digest, released FROM mqtt_received WHERE session = ?',
      session,
    );
    for (const row of rows) {
      received.#taken.set(row.packet_id, { digest: row.digest, durable: true, released: row.released === 1 });
      if (row.released === 1) received.#released += 1;
    }
    return received;
  }

  /**
   * Whether a QoS 2 PUBLISH is a copy of a message taken before: sent again (DUP), with an id taken
   * and the same topic and payload. A PUBLISH without DUP is new, and lets the released ids go.
   */
  isCopy(message: BrokerMessage): boolean {
    if (!message.dup) {
      this.#forgetReleased();
      return false;
    }
    const taken = this.#taken.get(message.packetId ?? 0);
    return taken !== undefined && taken.digest === digestOf(message);
  }

  /** How many ids are kept (taken, or released and kept a little longer). */
  get size(): number {
    return this.#taken.size;
  }

  /** The write that marks the message taken, for the transaction of what it leaves in the queue file. */
  mark(message: BrokerMessage): SideWrite {
    return { sql: MARK, params: [this.session, message.packetId ?? 0, digestOf(message)] };
  }

  /** The message was taken: committed with `mark(message)` (`durable`), or it left nothing to commit. */
  taken(message: BrokerMessage, durable: boolean): void {
    const id = message.packetId ?? 0;
    if (this.#taken.get(id)?.released === true) this.#released -= 1;
    this.#taken.set(id, { digest: digestOf(message), durable, released: false });
  }

  /** The broker released `id` (PUBREL): resolves once that is durable, when the PUBCOMP may go. */
  async release(id: number): Promise<void> {
    const taken = this.#taken.get(id);
    if (taken === undefined || taken.released) return;
    if (!taken.durable) {
      this.#taken.delete(id);
      return;
    }
    await this.queue.write({ sql: RELEASE, params: [this.session, id] });
    if (this.#taken.get(id) === taken) {
      taken.released = true;
      this.#released += 1;
    }
  }

  /** The broker has no session (CONNACK without one): no id of the old one will come back. */
  async forgetAll(): Promise<void> {
    if ([...this.#taken.values()].some((taken) => taken.durable)) await this.queue.write({ sql: FORGET, params: [this.session] });
    this.#taken.clear();
    this.#released = 0;
  }

  #forgetReleased(): void {
    if (this.#released === 0) return;
    for (const [id, taken] of this.#taken) if (taken.released) this.#taken.delete(id);
    this.#released = 0;
    // Needs no wait: an id still in the file after a crash is one more the next PUBLISH without DUP lets go.
    this.queue.write({ sql: FORGET_RELEASED, params: [this.session] }).catch(() => undefined);
  }
}
