import type { QueueWriter, SideWrite } from '../../queue/queue-writer.js';

/**
 * Made at the subscription's start, not by a format step (queue-format.ts): an older release opening
 * the file passes a table it does not know by, so no format version is spent on it.
 */
const CREATE = `CREATE TABLE IF NOT EXISTS mqtt_received (
  session   TEXT    NOT NULL,
  packet_id INTEGER NOT NULL,
  PRIMARY KEY (session, packet_id)
) WITHOUT ROWID`;
const MARK = 'INSERT OR REPLACE INTO mqtt_received (session, packet_id) VALUES (?, ?)';
const RELEASE = 'DELETE FROM mqtt_received WHERE session = ? AND packet_id = ?';
const FORGET = 'DELETE FROM mqtt_received WHERE session = ?';

/**
 * The QoS 2 messages of one broker session the gateway took and the broker has not released yet:
 * their packet ids, from the PUBLISH until the PUBREL. A message that left something in the queue
 * file (readings, a dead letter) has its id committed in the same transaction, before its PUBREC, so
 * the id survives whatever took the PUBREC (kill -9, a power cut in `power-loss` mode, a restart of
 * the broker, which keeps the session and sends the PUBLISH again): the PUBLISH sent again is
 * acknowledged without being stored. The id is deleted, durably, before the PUBCOMP: only after the
 * PUBCOMP may the broker use it for another message. A message that left nothing (retained, without
 * a number) is remembered in memory only: sent again after a restart it leaves nothing again.
 */
export class ReceivedPackets {
  /** Packet id → whether it is in the queue file. */
  readonly #ids = new Map<number, boolean>();

  private constructor(
    private readonly queue: QueueWriter,
    /** The broker and client id: a session's packet ids mean nothing in another's. */
    private readonly session: string,
  ) {}

  static open(queue: QueueWriter, session: string): ReceivedPackets {
    const received = new ReceivedPackets(queue, session);
    queue.run(CREATE);
    for (const { packet_id } of queue.run<{ packet_id: number }>('SELECT packet_id FROM mqtt_received WHERE session = ?', session)) {
      received.#ids.set(packet_id, true);
    }
    return received;
  }

  /** The message with this packet id was taken and not released: the PUBLISH is a copy. */
  has(id: number): boolean {
    return this.#ids.has(id);
  }

  /** How many the broker has not released. */
  get size(): number {
    return this.#ids.size;
  }

  /** The write that marks `id` taken, for the transaction of what the message leaves in the queue file. */
  mark(id: number): SideWrite {
    return { sql: MARK, params: [this.session, id] };
  }

  /** `id` was taken: committed with `mark(id)` (`durable`), or left nothing to commit. */
  taken(id: number, durable: boolean): void {
    this.#ids.set(id, durable);
  }

  /** The broker released `id` (PUBREL): resolves once forgotten durably, when the PUBCOMP may go. */
  async release(id: number): Promise<void> {
    if (this.#ids.get(id) === true) await this.queue.write({ sql: RELEASE, params: [this.session, id] });
    this.#ids.delete(id);
  }

  /** The broker has no session (CONNACK without one): no id of the old one will come back. */
  async forgetAll(): Promise<void> {
    if ([...this.#ids.values()].some((durable) => durable)) await this.queue.write({ sql: FORGET, params: [this.session] });
    this.#ids.clear();
  }
}
