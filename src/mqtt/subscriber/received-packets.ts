import { createHash } from 'node:crypto';
import type { QueueWriter, SideWrite } from '../../queue/queue-writer.js';
import type { BrokerMessage } from './broker-client.js';

/**
 * Made at the subscription's start, not by a format step (queue-format.ts): an older release opening
 * the file passes a table it does not know by, so no format version is spent on it. A row per packet
 * id, so at most 65,535 rows a session.
 */
const CREATE = `CREATE TABLE IF NOT EXISTS mqtt_received (
  session   TEXT    NOT NULL,
  packet_id INTEGER NOT NULL,
  digest    TEXT    NOT NULL,
  PRIMARY KEY (session, packet_id)
) WITHOUT ROWID`;
const MARK = 'INSERT OR REPLACE INTO mqtt_received (session, packet_id, digest) VALUES (?, ?, ?)';
const DIGEST = 'SELECT digest FROM mqtt_received WHERE session = ? AND packet_id = ?';
const FORGET = 'DELETE FROM mqtt_received WHERE session = ?';

/** A message's identity beside its packet id: its topic and payload. */
const digestOf = (message: BrokerMessage): string =>
  createHash('sha256').update(message.topic).update('\0').update(message.payload).digest('base64url').slice(0, 22);

/**
 * The QoS 2 messages of one broker session the gateway took, by packet id: the last message each id
 * brought that left something in the queue file (readings, a dead letter), committed in the same
 * transaction, before its PUBREC, so it survives whatever took the PUBREC (kill -9, a power cut in
 * `power-loss` mode, a restart of the broker). A PUBLISH the broker sends again (DUP set) with that
 * id, topic and payload is a copy: acknowledged, not stored.
 *
 * The id is kept past its PUBREL and PUBCOMP, until the broker hands it out for a new message: a
 * broker that restarts before it reads the PUBCOMP must send the PUBREL again, but Mosquitto sends
 * the PUBLISH again instead, even after many newer messages. So the PUBCOMP needs no commit. A
 * message that left nothing (retained, without a number) is remembered in memory until its PUBREL:
 * sent again later it leaves nothing again.
 */
export class ReceivedPackets {
  /** Taken messages that left nothing in the file, not released yet: packet id → digest. */
  readonly #leftNothing = new Map<number, string>();

  private constructor(
    private readonly queue: QueueWriter,
    /** The broker and client id: a session's packet ids mean nothing in another's. */
    private readonly session: string,
  ) {}

  static open(queue: QueueWriter, session: string): ReceivedPackets {
    queue.run(CREATE);
    return new ReceivedPackets(queue, session);
  }

  /**
   * Whether a QoS 2 PUBLISH is a copy of a message taken before: sent again (DUP), with the id, topic
   * and payload of the last message taken under that id. A PUBLISH without DUP is a new message.
   */
  isCopy(message: BrokerMessage): boolean {
    const id = message.packetId ?? 0;
    if (!message.dup) {
      this.#leftNothing.delete(id);
      return false;
    }
    const digest = digestOf(message);
    if (this.#leftNothing.get(id) === digest) return true;
    return this.queue.run<{ digest: string }>(DIGEST, this.session, id)[0]?.digest === digest;
  }

  /** The write that marks the message taken, for the transaction of what it leaves in the queue file. */
  mark(message: BrokerMessage): SideWrite {
    return { sql: MARK, params: [this.session, message.packetId ?? 0, digestOf(message)] };
  }

  /** The message was taken: committed with `mark(message)` (`durable`), or it left nothing to commit. */
  taken(message: BrokerMessage, durable: boolean): void {
    const id = message.packetId ?? 0;
    if (durable) this.#leftNothing.delete(id);
    else this.#leftNothing.set(id, digestOf(message));
  }

  /** The broker released `id` (PUBREL): the PUBCOMP may go. */
  release(id: number): Promise<void> {
    this.#leftNothing.delete(id);
    return Promise.resolve();
  }

  /** The broker has no session (CONNACK without one): no id of the old one will come back. */
  async forgetAll(): Promise<void> {
    await this.queue.write({ sql: FORGET, params: [this.session] });
    this.#leftNothing.clear();
  }
}
