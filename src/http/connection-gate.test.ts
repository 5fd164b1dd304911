import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ConnectionGate } from './connection-gate.js';

/** What the gate uses of a socket: `once('close')` and `destroy()`, which closes it a moment later. */
class FakeSocket extends EventEmitter {
  destroyed = false;
  remoteAddress: string | undefined;
  pending: Buffer | null = null;
  read(): Buffer | null {
    const chunk = this.pending;
    this.pending = null;
    return chunk;
  }
  unshift(chunk: Buffer): void {
    this.pending = chunk;
  }
  /** The client sends its first bytes (a TLS ClientHello, a request line). */
  send(bytes: string): void {
    this.pending = Buffer.from(bytes);
    this.emit('readable');
  }
  destroy(): this {
    if (!this.destroyed) {
      this.destroyed = true;
      queueMicrotask(() => this.emit('close'));
    }
    return this;
  }
}

const sockets = (n: number) => Array.from({ length: n }, () => new FakeSocket() as unknown as Socket & FakeSocket);
/** A connection from `address` admitted by `gate`, nothing read from it yet. */
function acceptedFrom(gate: ConnectionGate, address: string): Socket & FakeSocket {
  const [socket] = sockets(1);
  socket!.remoteAddress = address;
  gate.admit(socket!);
  return socket!;
}
/** A connection from `address` admitted by `gate`, which has sent the start of a TLS handshake. */
function handshakeFrom(gate: ConnectionGate, address: string): Socket & FakeSocket {
  const socket = acceptedFrom(gate, address);
  gate.sniff(
    socket,
    () => undefined,
    () => undefined,
    () => true,
  );
  socket.send('\x16\x03\x01');
  return socket;
}

/** A response in flight: the gate waits for its 'close'. */
const response = () => new EventEmitter();

describe('connection gate', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('keeps unproven connections within their budget by closing the one idle the longest, never one in the middle of a request first', () => {
    const gate = new ConnectionGate({ maxConnections: 100, maxUnproven: 3, unprovenTimeoutMs: 5000 });
    const [a, b, c, d, e, f] = sockets(6);
    for (const socket of [a!, b!, c!]) expect(gate.admit(socket)).toBe(true);
    expect(gate.admit(d!)).toBe(true);
    expect(a!.destroyed).toBe(true);
    gate.requestStarted(b!, response());
    expect(gate.admit(e!)).toBe(true);
    // b is answering a request: c, idle, goes instead.
    expect([b!.destroyed, c!.destroyed]).toEqual([false, true]);
    expect(gate.admit(f!)).toBe(true);
    expect([b!.destroyed, d!.destroyed]).toEqual([false, true]);
    expect(gate.sizes).toEqual({ open: 3, unproven: 3 });
    expect(gate.counts.evicted).toBe(3);
  });

  it('closes connections that never sent a byte before one that did: a device sends at once, an idle socket never', () => {
    const gate = new ConnectionGate({ maxConnections: 100, maxUnproven: 3, unprovenTimeoutMs: 5000 });
    const [device, idle1, idle2, next1, next2, next3] = sockets(6);
    const handedOn: Socket[] = [];
    const sniffed = (socket: Socket) => {
      gate.admit(socket);
      gate.sniff(
        socket,
        (s) => handedOn.push(s),
        (s) => handedOn.push(s),
        () => true,
      );
    };
    sniffed(device!);
    device!.send('\x16\x03\x01');
    sniffed(idle1!);
    sniffed(idle2!);
    // The device's handshake is the oldest unproven connection, and it stays while silent ones go.
    sniffed(next1!);
    sniffed(next2!);
    expect([device!.destroyed, idle1!.destroyed, idle2!.destroyed]).toEqual([false, true, true]);
    expect(handedOn).toEqual([device]);
    next1!.send('G');
    next2!.send('G');
    // All have spoken: the longest idle goes.
    sniffed(next3!);
    expect([device!.destroyed, next1!.destroyed, next2!.destroyed]).toEqual([true, false, false]);
  });

  it("closes a connection of the host holding the most unproven ones before a device's handshake, however recently that host reconnected", () => {
    const gate = new ConnectionGate({ maxConnections: 100, maxUnproven: 4, unprovenTimeoutMs: 5000 });
    const from = (address: string) => handshakeFrom(gate, address);
    const other = from('198.51.100.9');
    const device = from('198.51.100.2');
    // One host, two addresses in one /64: its connections are all newer than the device's.
    const attacker = [from('2001:db8:7::1'), from('2001:db8:7::2')];
    for (let i = 0; i < 5; i++) attacker.push(from(`2001:db8:7::${i + 3}`));
    expect([other.destroyed, device.destroyed]).toEqual([false, false]);
    expect(attacker.filter((s) => !s.destroyed)).toHaveLength(2);
    expect(gate.sizes).toEqual({ open: 4, unproven: 4 });
    // Hosts holding one each: the longest idle goes.
    gate.prove(attacker.at(-1)!);
    gate.prove(attacker.at(-2)!);
    from('203.0.113.5');
    from('203.0.113.6');
    from('203.0.113.7');
    expect([other.destroyed, device.destroyed]).toEqual([true, false]);
  });

  it("keeps a device's connection accepted in a flood's burst, before its first bytes are read", () => {
    const gate = new ConnectionGate({ maxConnections: 100, maxUnproven: 4, unprovenTimeoutMs: 5000 });
    const accepted = (address: string) => acceptedFrom(gate, address);
    // One turn of the event loop accepts them all; none has been read yet.
    const device = accepted('198.51.100.2');
    const flood = Array.from({ length: 40 }, (_, i) => accepted(`203.0.113.${1 + (i % 3)}`));
    expect(device.destroyed).toBe(false);
    expect(flood.filter((s) => !s.destroyed)).toHaveLength(3);
    expect(gate.sizes).toEqual({ open: 4, unproven: 4 });
  });

  it("closes a connection older than a second before a device's new one, whatever their hosts hold", () => {
    const gate = new ConnectionGate({ maxConnections: 100, maxUnproven: 3, unprovenTimeoutMs: 5000 });
    const from = (address: string) => handshakeFrom(gate, address);
    const login = from('198.51.100.7');
    vi.advanceTimersByTime(1500);
    const device = from('198.51.100.2');
    const slow = from('198.51.100.8');
    // A kept-alive login answered after the device connected: the device's handshake is now the
    // longest idle, but the login's connection is over a second old.
    const answer = response();
    gate.requestStarted(login, answer);
    answer.emit('close');
    from('198.51.100.9');
    expect([login.destroyed, device.destroyed, slow.destroyed]).toEqual([true, false, false]);
  });

  it('closes the oldest unproven connection even mid-request when every one is busy', () => {
    const gate = new ConnectionGate({ maxConnections: 100, maxUnproven: 2, unprovenTimeoutMs: 5000 });
    const [a, b, c] = sockets(3);
    for (const socket of [a!, b!]) {
      gate.admit(socket);
      gate.requestStarted(socket, response());
    }
    expect(gate.admit(c!)).toBe(true);
    expect([a!.destroyed, b!.destroyed]).toEqual([true, false]);
  });

  it("keeps the rest of MAX_CONNECTIONS for proven connections, which unproven ones make room for, and refuses only when all are devices'", async () => {
    const gate = new ConnectionGate({ maxConnections: 4, maxUnproven: 2, unprovenTimeoutMs: 5000 });
    const all = sockets(8);
    const [d1, d2, u1, u2, d3, d4, late] = all;
    for (const socket of [d1!, d2!]) {
      gate.admit(socket);
      gate.prove(socket);
    }
    gate.admit(u1!);
    gate.admit(u2!);
    expect(gate.sizes).toEqual({ open: 4, unproven: 2 });
    // Full: a device's new connection takes an unproven one's place, then proves itself.
    expect(gate.admit(d3!)).toBe(true);
    expect(u1!.destroyed).toBe(true);
    gate.prove(d3!);
    expect(gate.admit(d4!)).toBe(true);
    expect(u2!.destroyed).toBe(true);
    gate.prove(d4!);
    expect(gate.sizes).toEqual({ open: 4, unproven: 0 });
    expect(gate.admit(late!)).toBe(false);
    expect(late!.destroyed).toBe(true);
    expect(gate.counts).toMatchObject({ evicted: 2, refused: 1 });
    await Promise.resolve();
    // A device's connection that ends frees its place.
    d1!.destroy();
    await Promise.resolve();
    expect(gate.admit(all[7]!)).toBe(true);
    expect(gate.sizes).toEqual({ open: 4, unproven: 1 });
  });

  it("holds a TLS connection over its host's handshake budget until its next token, lets clear text through at once, and lets the host through once it shows a key", async () => {
    const handshakes = { hostBurst: 2, hostPerSecond: 1, allBurst: 100, allPerSecond: 100, maxHosts: 10, knownForMs: 60_000 };
    const gate = new ConnectionGate({ maxConnections: 100, maxUnproven: 50, unprovenTimeoutMs: 60_000, handshakes });
    const started: string[] = [];
    const connect = (address: string, first: string, name: string) => {
      const socket = acceptedFrom(gate, address);
      gate.sniff(
        socket,
        () => started.push(`tls ${name}`),
        () => started.push(`plain ${name}`),
        (byte) => byte === 0x16,
      );
      socket.send(first);
      return socket;
    };
    connect('198.51.100.7', '\x16', 'a');
    connect('198.51.100.7', '\x16', 'b');
    connect('198.51.100.7', '\x16', 'c');
    const plain = connect('198.51.100.7', 'G', 'd');
    expect(started).toEqual(['tls a', 'tls b', 'plain d']);
    expect(gate.handshakes).toEqual({ held: 1, waiting: 1 });
    vi.advanceTimersByTime(1000);
    expect(started.at(-1)).toBe('tls c');
    connect('198.51.100.7', '\x16', 'e');
    expect(started.at(-1)).toBe('tls c');
    // A device key on any of the host's connections: what it had waiting goes on at once.
    gate.prove(plain);
    expect(started.at(-1)).toBe('tls e');
    connect('198.51.100.7', '\x16', 'f');
    expect(started.at(-1)).toBe('tls f');
    // Stopping closes what still waits: it carries no request to finish.
    const waiting = ['g', 'h', 'i'].map((name) => connect('203.0.113.9', '\x16', name));
    expect(gate.handshakes.waiting).toBe(1);
    gate.closeUndecided();
    expect(waiting.map((s) => s.destroyed)).toEqual([false, false, true]);
    await Promise.resolve();
    expect(gate.handshakes).toEqual({ held: 3, waiting: 0 });
  });

  it('proves a TLS connection through the socket it wraps', () => {
    const gate = new ConnectionGate({ maxConnections: 10, maxUnproven: 5, unprovenTimeoutMs: 5000 });
    const [raw] = sockets(1);
    gate.admit(raw!);
    gate.prove({ _parent: raw } as unknown as Socket);
    expect(gate.sizes).toEqual({ open: 1, unproven: 0 });
  });

  it('closes unproven connections idle for UNPROVEN_TIMEOUT_MS, counting from their last answer; never proven ones', () => {
    const gate = new ConnectionGate({ maxConnections: 10, maxUnproven: 5, unprovenTimeoutMs: 1000 });
    const [idle, busy, device, later] = sockets(4);
    for (const socket of [idle!, busy!, device!]) gate.admit(socket);
    gate.prove(device!);
    const answer = response();
    gate.requestStarted(busy!, answer);
    vi.advanceTimersByTime(600);
    gate.admit(later!);
    vi.advanceTimersByTime(700);
    expect([idle!.destroyed, busy!.destroyed, device!.destroyed, later!.destroyed]).toEqual([true, false, false, false]);
    answer.emit('close');
    vi.advanceTimersByTime(700);
    // later's second has passed; busy's starts again at its answer.
    expect([busy!.destroyed, later!.destroyed]).toEqual([false, true]);
    vi.advanceTimersByTime(600);
    expect(busy!.destroyed).toBe(true);
    vi.advanceTimersByTime(60_000);
    expect(device!.destroyed).toBe(false);
    expect(gate.counts.expired).toBe(3);
  });

  it('adds nothing to a proven connection’s requests', () => {
    const gate = new ConnectionGate({ maxConnections: 10, maxUnproven: 5, unprovenTimeoutMs: 1000 });
    const [device] = sockets(1);
    gate.admit(device!);
    gate.prove(device!);
    const answer = response();
    gate.requestStarted(device!, answer);
    expect(answer.listenerCount('close')).toBe(0);
  });
});
