import { connect as connectTcp, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { generate, parser as packetParser, type IPublishPacket, type Packet } from 'mqtt-packet';
import { FrameReader } from '../frame-reader.js';

/** What became of one message: acknowledge it, or leave it unacknowledged and reconnect (the broker sends it again). */
export type Handled = 'ack' | 'retry';

/** A message from the broker. */
export interface BrokerMessage {
  topic: string;
  payload: Buffer;
  retained: boolean;
  qos: 0 | 1 | 2;
  /** The packet id of a QoS 1 or 2 message. */
  packetId: number | undefined;
  /** The broker sent it before (DUP). */
  dup: boolean;
}

/** The QoS 2 messages taken (received-packets.ts). */
export interface InboundPackets {
  isCopy(message: BrokerMessage): boolean;
  release(id: number): Promise<void>;
  forgetAll(): Promise<void>;
}

export interface BrokerClientOptions {
  url: URL;
  clientId: string;
  username: string | undefined;
  password: string | undefined;
  /** PEM of the authorities for `mqtts://`; the system's when undefined. */
  ca: string | undefined;
  topics: readonly string[];
  keepAliveS: number;
  maxPacketBytes: number;
  /**
   * Handles a message the gateway has not taken before; the broker is acknowledged (in arrival
   * order) once the promise says `ack`. A QoS 2 message it acknowledges must be taken in `received` by then.
   */
  onMessage: (message: BrokerMessage) => Promise<Handled>;
  received: InboundPackets;
  onState: (event: { connected: boolean; error?: string }) => void;
  /** The QoS the broker granted each topic filter (SUBACK), in the order of `topics`; 128 refused. */
  onSubscribed: (granted: readonly number[]) => void;
  /** A QoS 2 PUBLISH of a message taken before was acknowledged again without being handled. */
  onCopy: () => void;
}

interface Slot {
  messageId: number;
  qos: 1 | 2;
  handled?: Handled;
}

const BACKOFF_MS = { first: 1000, max: 30_000 };
/**
 * Messages handled and not yet acknowledged at most: beyond it the socket is not read until half
 * are. A broker keeps its own window (Mosquitto's `max_inflight_messages`), but a restarted one may
 * send a whole session's backlog at once, and each message waiting holds memory.
 */
const MAX_UNACKNOWLEDGED = 1000;

/**
 * A subscriber to a site broker on a persistent session (MQTT 3.1.1, clean session off, QoS 2), so
 * the broker keeps what is published while the gateway is away. Messages are handled as they come,
 * many at once (the queue commits them together), and acknowledged in the order they came, each
 * only once handled; a message that cannot be handled ends the connection without its PUBACK
 * (PUBREC), and the broker sends it again after the reconnect. A QoS 2 PUBLISH that `received` knows
 * as a copy of a message taken before (its PUBREC was lost) is acknowledged again, not handled; a
 * PUBREL is answered once `received` let it go. Reconnects with backoff until stopped.
 */
export class BrokerClient {
  #socket: Socket | undefined;
  #slots: Slot[] = [];
  /** QoS 2 messages being handled, by packet id: a copy that comes meanwhile waits for the first. */
  #handling = new Map<number, Promise<Handled>>();
  #stopped = false;
  #backoffMs = BACKOFF_MS.first;
  #reconnect: NodeJS.Timeout | undefined;
  #ping: NodeJS.Timeout | undefined;
  #nextId = 1;
  #drained: (() => void) | undefined;
  #lastSentMs = 0;

  constructor(private readonly options: BrokerClientOptions) {}

  start(): void {
    this.#connect();
  }

  /** Stops reading; waits until what was received is acknowledged (or `deadline`), then disconnects. */
  async stop(deadline: number): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#reconnect);
    const socket = this.#socket;
    if (socket === undefined || socket.destroyed) return;
    socket.pause();
    if (this.#slots.length > 0) {
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
        setTimeout(resolve, Math.max(0, deadline - Date.now())).unref();
      });
    }
    this.#write(socket, { cmd: 'disconnect' });
    socket.end();
    await new Promise<void>((resolve) => {
      if (socket.destroyed) resolve();
      socket.once('close', () => resolve());
      setTimeout(() => socket.destroy(), 1000).unref();
    });
  }

  #connect(): void {
    const { url } = this.options;
    const port = Number(url.port || (url.protocol === 'mqtts:' ? 8883 : 1883));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const socket =
      url.protocol === 'mqtts:'
        ? connectTls({ host, port, servername: /^[\d.:]+$/.test(host) ? undefined : host, ca: this.options.ca, minVersion: 'TLSv1.2' })
        : connectTcp({ host, port });
    this.#socket = socket;
    this.#slots = [];
    const parser = packetParser({ protocolVersion: 4 });
    const reader = new FrameReader(this.options.maxPacketBytes, {
      header: () => true,
      frame: (frame) => parser.parse(frame),
      problem: (problem) =>
        this.#fail(socket, `the broker sent a ${problem === 'too_large' ? 'packet over MQTT_MAX_PACKET_BYTES' : 'malformed packet'}`),
    });
    parser.on('packet', (packet: Packet) => this.#onPacket(socket, packet));
    parser.on('error', (error: Error) => this.#fail(socket, `malformed packet from the broker: ${error.message}`));
    socket.setNoDelay(true);
    socket.once(url.protocol === 'mqtts:' ? 'secureConnect' : 'connect', () => {
      this.#write(socket, {
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: 4,
        clientId: this.options.clientId,
        clean: false,
        keepalive: this.options.keepAliveS,
        ...(this.options.username === undefined ? {} : { username: this.options.username }),
        ...(this.options.password === undefined ? {} : { password: Buffer.from(this.options.password) }),
      });
    });
    socket.on('data', (chunk: Buffer) => reader.push(chunk));
    socket.on('error', (error) => this.#fail(socket, error.message));
    socket.once('close', () => {
      reader.stop();
      clearInterval(this.#ping);
      this.options.onState({ connected: false });
      this.#drained?.();
      if (!this.#stopped) {
        this.#reconnect = setTimeout(() => this.#connect(), this.#backoffMs);
        this.#backoffMs = Math.min(BACKOFF_MS.max, this.#backoffMs * 2);
      }
    });
  }

  #onPacket(socket: Socket, packet: Packet): void {
    switch (packet.cmd) {
      case 'connack': {
        if (packet.returnCode !== 0) {
          this.#fail(
            socket,
            `the broker refused the connection (CONNACK ${packet.returnCode}: ${CONNACK_WORDS[packet.returnCode ?? 0] ?? 'refused'})`,
          );
          return;
        }
        this.#backoffMs = BACKOFF_MS.first;
        this.options.onState({ connected: true });
        // Without a session the broker sends no message of the old one again, and may use its
        // packet ids for new ones: they are forgotten before anything is subscribed.
        (packet.sessionPresent ? Promise.resolve() : this.options.received.forgetAll()).then(
          () =>
            // Retained messages it sends for the subscription carry the retain flag and are skipped.
            this.#write(socket, {
              cmd: 'subscribe',
              messageId: this.#messageId(),
              subscriptions: this.options.topics.map((topic) => ({ topic, qos: 2 as const })),
            }),
          (error: Error) => this.#fail(socket, `the packet ids of the broker's last session could not be forgotten: ${error.message}`),
        );
        this.#ping = setInterval(
          () => {
            if (Date.now() - this.#lastSentMs >= this.options.keepAliveS * 500) this.#write(socket, { cmd: 'pingreq' });
          },
          (this.options.keepAliveS * 1000) / 2,
        ).unref();
        socket.setTimeout(this.options.keepAliveS * 1500, () => this.#fail(socket, 'the broker stopped answering (keep-alive)'));
        return;
      }
      case 'suback': {
        const granted = packet.granted as number[];
        if (granted.some((code) => code === 0x80)) {
          this.#fail(socket, `the broker refused a subscription to ${this.options.topics.join(', ')} (not authorised?)`);
          return;
        }
        this.options.onSubscribed(granted);
        return;
      }
      case 'publish':
        this.#onPublish(socket, packet);
        return;
      case 'pubrel': {
        const id = packet.messageId ?? 0;
        this.options.received.release(id).then(
          () => {
            if (socket === this.#socket) this.#write(socket, { cmd: 'pubcomp', messageId: id });
          },
          (error: Error) => this.#fail(socket, `a released packet id could not be let go: ${error.message}`),
        );
        return;
      }
      case 'pingresp':
      case 'unsuback':
        return;
      default:
        this.#fail(socket, `unexpected ${packet.cmd} from the broker`);
    }
  }

  #onPublish(socket: Socket, packet: IPublishPacket): void {
    const payload = typeof packet.payload === 'string' ? Buffer.from(packet.payload) : packet.payload;
    const packetId = packet.qos === 0 ? undefined : (packet.messageId ?? 0);
    const slot: Slot | undefined = packet.qos === 0 ? undefined : { messageId: packetId ?? 0, qos: packet.qos };
    if (slot !== undefined && this.#slots.push(slot) >= MAX_UNACKNOWLEDGED) socket.pause();
    const message: BrokerMessage = { topic: packet.topic, payload, retained: packet.retain, qos: packet.qos, packetId, dup: packet.dup };
    const handling = packet.qos === 2 ? this.#handleOnce(packetId ?? 0, message) : this.options.onMessage(message);
    handling
      .catch(() => 'retry' as const)
      .then((handled) => {
        if (slot === undefined) return;
        slot.handled = handled;
        this.#flush(socket);
      });
  }

  /** A QoS 2 message handled unless taken before; a copy that comes while the first is handled waits for it. */
  #handleOnce(id: number, message: BrokerMessage): Promise<Handled> {
    const earlier = this.#handling.get(id);
    const handling = (async (): Promise<Handled> => {
      if (earlier !== undefined) await earlier.catch(() => undefined);
      if (this.options.received.isCopy(message)) {
        this.options.onCopy();
        return 'ack';
      }
      return this.options.onMessage(message);
    })();
    this.#handling.set(id, handling);
    const settled = (): void => {
      if (this.#handling.get(id) === handling) this.#handling.delete(id);
    };
    handling.then(settled, settled);
    return handling;
  }

  /** Acknowledges the handled messages at the head, in order; a message to retry ends the connection. */
  #flush(socket: Socket): void {
    if (socket !== this.#socket || socket.destroyed) return;
    socket.cork();
    while (this.#slots.length > 0) {
      const head = this.#slots[0]!;
      if (head.handled === undefined) break;
      if (head.handled === 'retry') {
        socket.uncork();
        this.#fail(socket, 'a message could not be stored; it stays with the broker until the reconnect');
        return;
      }
      this.#slots.shift();
      this.#write(socket, { cmd: head.qos === 1 ? 'puback' : 'pubrec', messageId: head.messageId });
    }
    socket.uncork();
    if (this.#slots.length === 0) this.#drained?.();
    if (!this.#stopped && socket.isPaused() && this.#slots.length <= MAX_UNACKNOWLEDGED / 2) socket.resume();
  }

  #write(socket: Socket, packet: Packet): void {
    if (socket.destroyed || !socket.writable) return;
    this.#lastSentMs = Date.now();
    socket.write(generate(packet, { protocolVersion: 4 }));
  }

  #fail(socket: Socket, error: string): void {
    if (socket.destroyed) return;
    this.options.onState({ connected: false, error });
    socket.destroy();
  }

  #messageId(): number {
    const id = this.#nextId;
    this.#nextId = (this.#nextId % 65535) + 1;
    return id;
  }
}

const CONNACK_WORDS: Record<number, string> = {
  1: 'unacceptable protocol version',
  2: 'client id rejected',
  3: 'server unavailable',
  4: 'bad user name or password',
  5: 'not authorised',
};
