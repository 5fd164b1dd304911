import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { generate, parser as packetParser, type IConnectPacket, type IPublishPacket, type Packet } from 'mqtt-packet';
import type { Logger } from 'pino';
import type { MqttBrokerConfig } from '../config/mqtt-config.js';
import type { InflightBudget } from '../http/inflight-budget.js';
import type { FailureDelay } from '../http/middleware/api-key/failure-delay.js';
import type { KeyGrant, KeyStore, Principal } from '../keys/key-store.js';
import type { Validator } from '../reading/parse-readings.js';
import type { Loc } from '../reading/reading-issues.js';
import type { Reading } from '../reading/reading-schema.js';
import type { MqttStats } from '../stats.js';
import { FrameReader, type FrameProblem } from './frame-reader.js';
import type { IngestOutcome, MqttIngest, StoreListener } from './mqtt-ingest.js';
import { ackSize, writeAck } from './publish-acks.js';
import { readPublishFrame } from './publish-frame.js';
import { INGEST_TOPIC, readingsOfPublish } from './publish-readings.js';
import { CONNACK_V4, REASON, REFUSAL_REASON, UNAVAILABLE_REASON } from './reason-codes.js';

export interface DeviceSessionDeps {
  keys: KeyStore;
  failureDelay: FailureDelay;
  /** Aborted when the gateway stops: delayed refusals are then sent at once. */
  stopping: AbortSignal;
  ingest: MqttIngest;
  validator: Validator;
  maxBatchReadings: number;
  config: MqttBrokerConfig;
  /** The time a new connection has to send its CONNECT (`HEADERS_TIMEOUT_MS`, as for HTTP headers). */
  connectTimeoutMs: number;
  /** The time one packet may take from its first byte to its last (`REQUEST_TIMEOUT_MS`). */
  packetTimeoutMs: number;
  /** Bytes of packets held at once, shared with HTTP's request bodies (`MAX_INFLIGHT_BYTES`). */
  budget: InflightBudget;
  stats: MqttStats;
  sessions: SessionTable;
  queue: { isFull(): boolean };
  /** Told when a CONNECT is accepted: the connection is a device's from then on (HTTP's connection gate). */
  gate: { prove(socket: Socket): void };
  logger: Logger;
}

/** Packets smaller than this are not counted against the shared budget: a connection's ordinary traffic. */
const SMALL_PACKET_BYTES = 16 * 1024;
/** The key name of clients let in without a password (`MQTT_ANONYMOUS=on`). */
export const ANONYMOUS = 'anonymous';

/**
 * A publish being stored, told its outcome by MqttIngest; a QoS 1 or 2 one is also its place in the
 * order of acknowledgements. One object a publish, where promises and their callbacks were several.
 */
class InflightPublish implements StoreListener {
  /** Set once the publish is settled: the reason to acknowledge with, or `disconnect` with one. */
  reason: number | undefined = undefined;
  disconnect: number | undefined = undefined;
  /** Its readings while they are stored: once they are, the session notes their ships. */
  readings: Reading[] | undefined = undefined;

  constructor(
    readonly session: DeviceSession,
    readonly qos: 0 | 1 | 2,
    readonly messageId: number,
    readonly topic: string,
    readonly payload: Buffer,
    readonly receivedMs: number,
    /** The name of the key it was published with. */
    readonly key: string,
  ) {}

  stored(outcome: IngestOutcome): void {
    this.session.published(this, outcome);
  }
}

/** Where a reading's ship id came from, for a refusal: the topic, or the ingest topic's payload. */
const TOPIC_SHIP: Loc = ['topic', 'ship_id'];
const topicShipLoc = (): Loc => TOPIC_SHIP;
const payloadShipLoc = (index: number): Loc => ['payload', index, 'ship_id'];

/**
 * What a client id's session keeps between its connections in this run: the QoS 2 packet ids whose
 * readings are committed and whose PUBREL has not come yet, so a PUBLISH sent again is not stored twice.
 */
export class SessionTable {
  readonly #released = new Map<string, Set<number>>();
  readonly #live = new Map<string, DeviceSession>();

  constructor(private readonly maxSessions = 10_000) {}

  /** Takes a client id over: the connection that had it is closed; returns the ids kept for it, if any. */
  attach(clientId: string, session: DeviceSession, clean: boolean): Set<number> | undefined {
    this.#live.get(clientId)?.takenOver();
    this.#live.set(clientId, session);
    const kept = this.#released.get(clientId);
    this.#released.delete(clientId);
    return clean ? undefined : kept;
  }

  /** The connection ended; a session that outlives it keeps its unreleased ids. */
  detach(clientId: string, session: DeviceSession, keep: Set<number> | undefined): void {
    if (this.#live.get(clientId) === session) this.#live.delete(clientId);
    if (keep === undefined || keep.size === 0) return;
    this.#released.set(clientId, keep);
    if (this.#released.size > this.maxSessions) this.#released.delete(this.#released.keys().next().value!);
  }
}

/**
 * One device's MQTT connection: CONNECT with a device key as the password, PUBLISH of readings, and
 * acknowledgements in the order the publishes came, each only once the publish's readings are
 * committed (or, where the protocol cannot refuse it, its dead letter is). Limits: the CONNECT must
 * come within `connectTimeoutMs`, each packet within `packetTimeoutMs` of its first byte and within
 * `maxPacketBytes`, a client silent for 1.5 keep-alives is closed, and at most `maxInflight` QoS 1/2
 * publishes wait at once (an MQTT 3.1.1 client is simply not read meanwhile).
 */
export class DeviceSession {
  readonly #socket: Socket;
  readonly #deps: DeviceSessionDeps;
  readonly #reader: FrameReader;
  readonly #parser = packetParser({ protocolVersion: 4 });
  #state: 'connecting' | 'connected' | 'closing' = 'connecting';
  #version = 4;
  #principal: Principal | undefined;
  /** The key's grant, renewed whenever the keys change; undefined for an anonymous client. */
  #grant: KeyGrant | undefined;
  /**
   * The longest prefix all ship ids this session stored share: a key whose new ship prefix is a
   * prefix of it still allows everything the session did. Undefined until a reading is stored.
   */
  #shipsPrefix: string | undefined;
  #clientId = '';
  #clean = true;
  #persistent = false;
  #acks: InflightPublish[] = [];
  /** QoS 2 ids committed and awaiting PUBREL. */
  #unreleased = new Set<number>();
  #reserved = 0;
  #packetTimer: NodeJS.Timeout | undefined;
  #pausedForInflight = false;
  #pausedForWrites = false;
  /** The client sent DISCONNECT. */
  #clientLeft = false;
  /** QoS 0 publishes not yet committed: bounded like the acknowledgements, as nothing else slows a QoS 0 sender. */
  #unsettledQos0 = 0;
  /** Settled publishes wait for the end of the commit's callbacks, so that their acknowledgements go out in one write. */
  #flushScheduled = false;

  constructor(socket: Socket, deps: DeviceSessionDeps) {
    this.#socket = socket;
    this.#deps = deps;
    this.#reader = new FrameReader(deps.config.maxPacketBytes, {
      header: (size) => this.#reserve(size),
      frame: (frame) => this.#onFrame(frame),
      problem: (problem, size) => this.#onFrameProblem(problem, size),
    });
    this.#parser.on('packet', (packet: Packet) => this.#onPacket(packet));
    this.#parser.on('error', (error: Error) => this.#onParseError(error));
    socket.setNoDelay(true);
    socket.setTimeout(deps.connectTimeoutMs, () => this.#close('idle', REASON.keepAliveTimeout));
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('drain', () => {
      this.#pausedForWrites = false;
      this.#resume();
    });
    socket.on('error', () => socket.destroy());
    socket.once('close', () => this.#onClose());
  }

  /** Another connection took this client id: it ends here. */
  takenOver(): void {
    this.#close('taken_over', REASON.sessionTakenOver);
  }

  /**
   * The keys changed: a session whose key was revoked, or whose key's ship prefix or site no longer
   * allows what it did, ends here (MQTT 5 with DISCONNECT 0x87 not authorized).
   */
  keysChanged(): void {
    if (this.#state === 'connected') this.#currentPrincipal();
  }

  /** The gateway's stop deadline passed: the connection ends whatever it still waits for. */
  cut(): void {
    this.#close('shutdown', REASON.shuttingDown);
  }

  /** The gateway stops: read nothing more; close once what was committed is acknowledged. */
  stop(): void {
    if (this.#state === 'closing') return;
    this.#socket.pause();
    if (this.#state === 'connecting') {
      this.#socket.destroy();
      return;
    }
    this.#state = 'closing';
    this.#flushAcks();
    if (this.#acks.length === 0) this.#end(REASON.shuttingDown);
  }

  #onData(chunk: Buffer): void {
    this.#reader.push(chunk);
    this.#timePacket();
  }

  /**
   * A packet begun and not finished must be finished within packetTimeoutMs, while the gateway
   * reads: the time it holds the client (not reading it) is not the client's.
   */
  #timePacket(): void {
    if (this.#reader.midPacket && !this.#pausedForInflight && !this.#pausedForWrites) {
      this.#packetTimer ??= setTimeout(() => this.#close('slow_packet', REASON.keepAliveTimeout), this.#deps.packetTimeoutMs);
    } else if (this.#packetTimer !== undefined) {
      clearTimeout(this.#packetTimer);
      this.#packetTimer = undefined;
    }
  }

  /** A packet's size is known: a large one must fit the shared budget, or the client is turned away. */
  #reserve(size: number): boolean {
    if (size < SMALL_PACKET_BYTES) return true;
    if (!this.#deps.budget.tryReserve(size)) {
      this.#close('busy', REASON.serverBusy);
      return false;
    }
    this.#reserved += size;
    return true;
  }

  #onFrame(frame: Buffer): void {
    try {
      // A device's PUBLISH is read in place; every other packet, and any PUBLISH out of the ordinary, by the parser.
      const publish = this.#state === 'connected' ? readPublishFrame(frame, this.#version) : undefined;
      if (publish !== undefined) this.#onPublish(publish);
      else this.#parser.parse(frame);
    } finally {
      if (this.#reserved > 0) {
        this.#deps.budget.release(this.#reserved);
        this.#reserved = 0;
      }
    }
  }

  #onFrameProblem(problem: FrameProblem, size: number): void {
    this.#deps.logger.debug({ event: 'mqtt_packet_refused', problem, size, address: this.#socket.remoteAddress }, 'MQTT packet refused');
    this.#close(problem, problem === 'too_large' ? REASON.packetTooLarge : REASON.malformed);
  }

  #onParseError(error: Error): void {
    if (this.#state === 'connecting' && /protocol version/i.test(error.message)) {
      this.#deps.stats.refusedConnections += 1;
      this.#write({ cmd: 'connack', returnCode: CONNACK_V4.unacceptableProtocol, sessionPresent: false });
      this.#close('protocol_version');
      return;
    }
    this.#close('malformed', REASON.malformed);
  }

  #onPacket(packet: Packet): void {
    if (this.#state === 'closing') return;
    if (this.#state === 'connecting') {
      if (packet.cmd === 'connect') this.#onConnect(packet);
      else this.#close('no_connect', REASON.protocolError);
      return;
    }
    switch (packet.cmd) {
      case 'publish':
        this.#onPublish(packet);
        return;
      case 'pubrel':
        this.#onPubrel(packet.messageId ?? 0);
        return;
      case 'pingreq':
        this.#write({ cmd: 'pingresp' });
        return;
      case 'subscribe':
        // The gateway takes readings; it has nothing to deliver to subscribers.
        this.#write({
          cmd: 'suback',
          messageId: packet.messageId ?? 0,
          granted: packet.subscriptions.map(() => (this.#version === 5 ? REASON.notAuthorized : 0x80)),
        });
        return;
      case 'unsubscribe':
        this.#write({
          cmd: 'unsuback',
          messageId: packet.messageId ?? 0,
          ...(this.#version === 5 ? { granted: packet.unsubscriptions.map(() => REASON.noSubscriptionExisted) } : { granted: [] }),
        });
        return;
      case 'disconnect':
        // What it published is still acknowledged; then the connection ends without a DISCONNECT back.
        this.#clientLeft = true;
        this.#state = 'closing';
        this.#socket.pause();
        this.#flushAcks();
        return;
      default:
        // A second CONNECT, acknowledgements of publishes the gateway never sent, AUTH.
        this.#close('protocol_error', REASON.protocolError);
    }
  }

  #onConnect(packet: IConnectPacket): void {
    const deps = this.#deps;
    this.#version = packet.protocolVersion === 5 ? 5 : 4;
    this.#clean = packet.clean !== false;
    if (this.#version === 5 && packet.properties?.authenticationMethod !== undefined) {
      this.#refuseConnect('authentication_method', CONNACK_V4.notAuthorized, REASON.badAuthenticationMethod);
      return;
    }
    const password = packet.password === undefined ? '' : packet.password.toString('utf8');
    if (password === '' && !deps.config.anonymous) {
      void this.#refuseAfterDelay('missing_key', CONNACK_V4.notAuthorized, REASON.notAuthorized);
      return;
    }
    const grant = password === '' ? undefined : deps.keys.grant(password);
    const principal = password === '' ? { name: ANONYMOUS } : grant?.principal;
    if (principal === undefined) {
      void this.#refuseAfterDelay('wrong_key', CONNACK_V4.badCredentials, REASON.badCredentials);
      return;
    }
    if (deps.queue.isFull() || deps.stopping.aborted) {
      this.#refuseConnect(
        'queue_full',
        CONNACK_V4.serverUnavailable,
        deps.stopping.aborted ? REASON.serverUnavailable : REASON.quotaExceeded,
      );
      return;
    }
    if (packet.clientId === '' && !this.#clean && this.#version === 4) {
      this.#refuseConnect('client_id', CONNACK_V4.identifierRejected, REASON.unspecified);
      return;
    }
    this.#principal = principal;
    this.#grant = grant;
    const assigned = packet.clientId === '' ? `harbor-${randomBytes(8).toString('hex')}` : undefined;
    this.#clientId = assigned ?? packet.clientId;
    // MQTT 5: a session outlives its connection only with a Session Expiry Interval; 3.1.1: without clean session.
    this.#persistent = this.#version === 5 ? (packet.properties?.sessionExpiryInterval ?? 0) > 0 : !this.#clean;
    const kept = deps.sessions.attach(this.#clientId, this, this.#clean);
    if (kept !== undefined) this.#unreleased = kept;
    this.#state = 'connected';
    deps.gate.prove(this.#socket);
    deps.stats.connections += 1;
    deps.stats.clients += 1;
    deps.keys.counters.seen(principal.name);
    const { keepAliveMaxS, maxInflight, maxPacketBytes } = deps.config;
    const keepAliveS =
      packet.keepalive === undefined || packet.keepalive === 0 || packet.keepalive > keepAliveMaxS ? keepAliveMaxS : packet.keepalive;
    this.#socket.setTimeout(keepAliveS * 1500);
    this.#write(
      this.#version === 5
        ? {
            cmd: 'connack',
            reasonCode: REASON.success,
            sessionPresent: kept !== undefined,
            properties: {
              receiveMaximum: maxInflight,
              maximumPacketSize: maxPacketBytes,
              topicAliasMaximum: 0,
              retainAvailable: false,
              wildcardSubscriptionAvailable: false,
              sharedSubscriptionAvailable: false,
              subscriptionIdentifiersAvailable: false,
              ...(keepAliveS !== packet.keepalive ? { serverKeepAlive: keepAliveS } : {}),
              ...(assigned !== undefined ? { assignedClientIdentifier: assigned } : {}),
            },
          }
        : { cmd: 'connack', returnCode: CONNACK_V4.accepted, sessionPresent: kept !== undefined },
    );
  }

  #refuseConnect(why: string, v4Code: number, v5Reason: number): void {
    this.#deps.stats.refusedConnections += 1;
    this.#deps.logger.debug({ event: 'mqtt_connect_refused', why, address: this.#socket.remoteAddress }, 'MQTT CONNECT refused');
    this.#write(
      this.#version === 5
        ? { cmd: 'connack', reasonCode: v5Reason, sessionPresent: false }
        : { cmd: 'connack', returnCode: v4Code, sessionPresent: false },
    );
    this.#state = 'closing';
    this.#socket.end();
  }

  /** A wrong or missing key: answered after the address's growing delay, as HTTP answers it. */
  async #refuseAfterDelay(why: string, v4Code: number, v5Reason: number): Promise<void> {
    const { failureDelay, logger, stopping } = this.#deps;
    this.#state = 'closing';
    this.#socket.pause();
    const address = this.#socket.remoteAddress ?? 'unknown';
    const wasAtCap = failureDelay.atCap(address);
    const waitMs = failureDelay.recordFailure(address);
    if (!wasAtCap && failureDelay.atCap(address)) {
      logger.warn({ event: 'auth_failures_delayed', address, delayMs: waitMs }, 'wrong API keys from this address are answered slowly');
    }
    await sleep(waitMs, undefined, { signal: stopping }).catch(() => undefined);
    if (this.#socket.destroyed) return;
    this.#state = 'connecting';
    this.#refuseConnect(why, v4Code, v5Reason);
  }

  #onPublish(packet: IPublishPacket): void {
    const deps = this.#deps;
    deps.stats.publishes[packet.qos] = (deps.stats.publishes[packet.qos] ?? 0) + 1;
    // Judged by the keys as they are now, whether or not the session has been told of a change yet.
    const principal = this.#currentPrincipal();
    if (principal === undefined) return;
    if (packet.properties?.topicAlias !== undefined) {
      this.#close('topic_alias', REASON.topicAliasInvalid);
      return;
    }
    // A topic name never holds a wildcard (MQTT-3.3.2-2): 3.1.1 closes the connection; MQTT 5 tells
    // the client (PUBACK or PUBREC 0x90, or DISCONNECT 0x90 for QoS 0). Nothing of it is stored.
    if (hasWildcard(packet.topic)) {
      deps.stats.refusedPublishes += 1;
      deps.logger.debug(
        { event: 'mqtt_publish_refused', key: principal.name, topic: packet.topic.slice(0, 200), problem: 'wildcard in topic name' },
        'publish refused',
      );
      if (this.#version === 5 && packet.qos > 0) {
        const refused = new InflightPublish(
          this,
          packet.qos,
          packet.messageId ?? 0,
          packet.topic,
          Buffer.alloc(0),
          Date.now(),
          principal.name,
        );
        refused.reason = REASON.topicNameInvalid;
        this.#acks.push(refused);
        this.#flushAcks();
      } else {
        this.#close('topic_wildcard', REASON.topicNameInvalid);
      }
      return;
    }
    const receivedMs = Date.now();
    const payload = typeof packet.payload === 'string' ? Buffer.from(packet.payload) : packet.payload;
    const publish = new InflightPublish(this, packet.qos, packet.messageId ?? 0, packet.topic, payload, receivedMs, principal.name);
    if (packet.qos > 0) {
      this.#acks.push(publish);
      if (this.#acks.length > deps.config.maxInflight) {
        if (this.#version === 5) {
          this.#close('receive_maximum', REASON.receiveMaximumExceeded);
          return;
        }
      }
      if (this.#acks.length >= deps.config.maxInflight && !this.#pausedForInflight) {
        this.#pausedForInflight = true;
        this.#socket.pause();
        this.#timePacket();
      }
      // Sent again before its PUBREL: its readings are committed already.
      if (packet.qos === 2 && this.#unreleased.has(publish.messageId)) {
        publish.reason = REASON.success;
        this.#flushAcks();
        return;
      }
    }
    const parsed = readingsOfPublish(packet.topic, payload, deps.validator, deps.maxBatchReadings);
    if (packet.qos === 0 && ++this.#unsettledQos0 >= deps.config.maxInflight && !this.#pausedForInflight) {
      this.#pausedForInflight = true;
      this.#socket.pause();
      this.#timePacket();
    }
    if (!parsed.ok) {
      this.published(publish, { status: 'refused', kind: parsed.refusal, message: parsed.message, details: parsed.details });
      return;
    }
    publish.readings = parsed.readings;
    const shipLoc = packet.topic === INGEST_TOPIC ? payloadShipLoc : topicShipLoc;
    const { shipLocs } = parsed;
    deps.ingest.storeTo(publish, principal, parsed.readings, shipLocs === undefined ? shipLoc : (i) => shipLocs[i] ?? shipLoc(i));
  }

  /** What became of a publish's readings (told by its InflightPublish): acknowledged once the acknowledgements before it are. */
  published(publish: InflightPublish, outcome: IngestOutcome): void {
    try {
      if (outcome.status === 'stored' && publish.readings !== undefined) this.#noteShips(publish.readings);
      publish.readings = undefined;
      this.#settle(outcome, publish);
    } catch (error) {
      this.#deps.logger.error({ event: 'mqtt_publish_failed', err: error }, 'MQTT publish could not be handled');
      if (publish.qos > 0) publish.disconnect = REASON.unspecified;
      else this.#unsettledQos0 -= 1;
      this.#flushAcks();
    }
  }

  #settle(outcome: IngestOutcome, publish: InflightPublish): void {
    const deps = this.#deps;
    const acknowledged = publish.qos > 0;
    switch (outcome.status) {
      case 'stored':
        deps.stats.acceptedReadings += outcome.readings;
        publish.reason = REASON.success;
        break;
      case 'empty':
        publish.reason = REASON.success;
        break;
      case 'unavailable':
        deps.stats.unacknowledged += 1;
        if (acknowledged) publish.disconnect = UNAVAILABLE_REASON[outcome.refusal];
        else this.#close('queue_unavailable', UNAVAILABLE_REASON[outcome.refusal]);
        break;
      case 'refused':
        deps.stats.refusedPublishes += 1;
        deps.keys.counters.refused(publish.key);
        deps.logger.debug(
          { event: 'mqtt_publish_refused', key: publish.key, topic: publish.topic, problem: outcome.message },
          'publish refused',
        );
        if (this.#version === 5 && acknowledged) {
          // The client is told; it is not stored anywhere, as an HTTP 422 is not.
          publish.reason = REFUSAL_REASON[outcome.kind];
          break;
        }
        void this.#deadLetter(outcome, publish);
        return;
    }
    this.#settled(publish);
  }

  /** Keeps a refusal the client cannot be told as a dead letter; acknowledged only once it is kept. */
  async #deadLetter(outcome: IngestOutcome & { status: 'refused' }, publish: InflightPublish): Promise<void> {
    const deps = this.#deps;
    try {
      await deps.ingest.deadLetter('mqtt', outcome, publish);
      deps.stats.deadLettered(publish.key);
      publish.reason = REASON.success;
    } catch {
      deps.stats.unacknowledged += 1;
      if (publish.qos > 0) publish.disconnect = REASON.quotaExceeded;
      else this.#close('dead_letters_full', REASON.quotaExceeded);
    }
    this.#settled(publish);
  }

  #settled(publish: InflightPublish): void {
    if (publish.qos === 2 && publish.reason === REASON.success) this.#unreleased.add(publish.messageId);
    if (publish.qos === 0) this.#unsettledQos0 -= 1;
    this.#scheduleFlush();
  }

  /**
   * Flushes once every publish a commit settled has been told: a commit answers many at once, one
   * after the other in one callback, and process.nextTick runs after it.
   */
  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    process.nextTick(this.#scheduledFlush);
  }

  readonly #scheduledFlush = (): void => {
    this.#flushScheduled = false;
    this.#flushAcks();
  };

  /**
   * The session's principal as the keys stand now; undefined, and the session closing, when its key
   * was revoked or no longer allows what the session did. One comparison while the keys are unchanged.
   */
  #currentPrincipal(): Principal | undefined {
    const grant = this.#grant;
    if (grant === undefined || grant.generation === this.#deps.keys.generation) return this.#principal;
    const renewed = this.#deps.keys.renew(grant);
    const why = renewed === undefined ? 'key_revoked' : this.#disallowed(renewed.principal);
    if (why !== undefined) {
      this.#deps.logger.info(
        { event: 'mqtt_session_ended', why, key: grant.principal.name, client: this.#clientId, address: this.#socket.remoteAddress },
        why === 'key_revoked' ? 'MQTT session ended: its key was revoked' : 'MQTT session ended: its key no longer allows what it did',
      );
      this.#close(why, REASON.notAuthorized);
      return undefined;
    }
    this.#grant = renewed;
    this.#principal = renewed!.principal;
    return this.#principal;
  }

  /** Why a key as it now stands no longer allows this session; undefined when it does. */
  #disallowed(now: Principal): string | undefined {
    // Its readings would be stored under another site than before.
    if (now.site !== this.#principal?.site) return 'key_site_changed';
    const prefix = now.shipPrefix;
    if (prefix === undefined || this.#shipsPrefix === undefined || this.#shipsPrefix.startsWith(prefix)) return undefined;
    return 'key_ship_prefix_changed';
  }

  #noteShips(readings: readonly Reading[]): void {
    let shared = this.#shipsPrefix ?? readings[0]?.shipId;
    if (shared === undefined) return;
    for (const { shipId } of readings) {
      if (shipId.startsWith(shared)) continue;
      let n = 0;
      while (n < shared.length && n < shipId.length && shared.charCodeAt(n) === shipId.charCodeAt(n)) n++;
      shared = shared.slice(0, n);
    }
    this.#shipsPrefix = shared;
  }

  #onPubrel(messageId: number): void {
    const known = this.#unreleased.delete(messageId);
    this.#write({
      cmd: 'pubcomp',
      messageId,
      ...(this.#version === 5 && !known ? { reasonCode: REASON.packetIdNotFound } : {}),
    });
  }

  /** Acknowledges, in arrival order, every publish at the head that is settled: in one write. */
  #flushAcks(): void {
    if (this.#socket.destroyed) return;
    const acks = this.#acks;
    let ready = 0;
    while (ready < acks.length && acks[ready]!.disconnect === undefined && acks[ready]!.reason !== undefined) ready++;
    if (ready > 0) {
      const size = ackSize(this.#version);
      const bytes = Buffer.allocUnsafe(ready * size);
      for (let i = 0; i < ready; i++) {
        const ack = acks[i]!;
        writeAck(bytes, i * size, ack.qos as 1 | 2, ack.messageId, this.#version, ack.reason!);
      }
      acks.splice(0, ready);
      this.#writeBytes(bytes);
    }
    const disconnect = acks[0]?.disconnect;
    if (disconnect !== undefined) {
      this.#close('queue_unavailable', disconnect);
      return;
    }
    if (this.#state === 'closing') {
      if (acks.length === 0) this.#end(REASON.shuttingDown);
      return;
    }
    if (this.#pausedForInflight && acks.length < this.#deps.config.maxInflight && this.#unsettledQos0 < this.#deps.config.maxInflight) {
      this.#pausedForInflight = false;
      this.#resume();
    }
  }

  #resume(): void {
    if (!this.#pausedForInflight && !this.#pausedForWrites && this.#state !== 'closing') this.#socket.resume();
    this.#timePacket();
  }

  #write(packet: Packet): void {
    this.#writeBytes(generate(packet, { protocolVersion: this.#version }));
  }

  #writeBytes(bytes: Buffer): void {
    if (this.#socket.destroyed || !this.#socket.writable) return;
    const ok = this.#socket.write(bytes);
    // A client that does not read its acknowledgements is not read either.
    if (!ok && !this.#pausedForWrites) {
      this.#pausedForWrites = true;
      this.#socket.pause();
      this.#timePacket();
    }
  }

  /** Ends a connection the gateway closes for a reason: MQTT 5 clients get a DISCONNECT saying which. */
  #close(why: string, v5Reason?: number): void {
    if (this.#socket.destroyed) return;
    if (why !== 'taken_over') this.#deps.stats.closedByGateway += 1;
    this.#deps.logger.debug(
      { event: 'mqtt_closed', why, client: this.#clientId, address: this.#socket.remoteAddress },
      'MQTT connection closed',
    );
    this.#reader.stop();
    this.#state = 'closing';
    if (this.#version === 5 && this.#principal !== undefined && v5Reason !== undefined) {
      this.#write({ cmd: 'disconnect', reasonCode: v5Reason });
      this.#socket.end();
      // A client that does not read its DISCONNECT does not keep the connection either.
      setTimeout(() => this.#socket.destroy(), 1000).unref();
    } else {
      this.#socket.destroy();
    }
  }

  #end(v5Reason: number): void {
    if (this.#version === 5 && this.#principal !== undefined && !this.#clientLeft) this.#write({ cmd: 'disconnect', reasonCode: v5Reason });
    this.#socket.end();
    setTimeout(() => this.#socket.destroy(), 1000).unref();
  }

  #onClose(): void {
    clearTimeout(this.#packetTimer);
    this.#reader.stop();
    if (this.#reserved > 0) this.#deps.budget.release(this.#reserved);
    this.#reserved = 0;
    if (this.#principal !== undefined && this.#clientId !== '') {
      this.#deps.stats.clients -= 1;
      this.#deps.sessions.detach(this.#clientId, this, this.#persistent ? this.#unreleased : undefined);
    }
  }
}

/** True when a topic name holds `+` or `#`, which only topic filters may. */
const hasWildcard = (topic: string): boolean => topic.includes('+') || topic.includes('#');
