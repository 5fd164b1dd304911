import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HandshakeBudget, type HandshakeLimits } from './handshake-budget.js';

/** Hosts' own budgets the tighter: every test but the one of everyone's budget sees only theirs. */
const LIMITS: HandshakeLimits = { hostBurst: 3, hostPerSecond: 2, allBurst: 1000, allPerSecond: 1000, maxHosts: 4, knownForMs: 60_000 };

/** What the budget uses of a socket: `destroyed`, and its 'close', which comes a moment after. */
class FakeSocket extends EventEmitter {
  destroyed = false;
  destroy(): void {
    this.destroyed = true;
  }
  close(): void {
    this.destroyed = true;
    this.emit('close');
  }
}
const socket = () => new FakeSocket() as unknown as Socket & FakeSocket;

describe('TLS handshake budget', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  /** Admits `n` connections of `host`, returning the order their handshakes started in. */
  function admitMany(budget: HandshakeBudget, host: string, n: number, started: string[], tag = host) {
    const sockets = Array.from({ length: n }, socket);
    for (const [i, s] of sockets.entries()) budget.admit(host, s, () => started.push(`${tag}#${i}`));
    return sockets;
  }

  it('lets a host without a device key start its burst at once, then one handshake each 1/perSecond s, the held ones in order', () => {
    const budget = new HandshakeBudget(LIMITS, Date.now);
    const started: string[] = [];
    admitMany(budget, '198.51.100.7', 6, started);
    expect(started).toEqual(['198.51.100.7#0', '198.51.100.7#1', '198.51.100.7#2']);
    expect(budget.held).toBe(3);
    vi.advanceTimersByTime(499);
    expect(started).toHaveLength(3);
    vi.advanceTimersByTime(1);
    expect(started.at(-1)).toBe('198.51.100.7#3');
    vi.advanceTimersByTime(1000);
    expect(started.slice(3)).toEqual(['198.51.100.7#3', '198.51.100.7#4', '198.51.100.7#5']);
    // A new connection queues behind none: the line is empty, yet no token has come back.
    const late: string[] = [];
    admitMany(budget, '198.51.100.7', 1, late);
    expect(late).toEqual([]);
    vi.advanceTimersByTime(500);
    expect(late).toEqual(['198.51.100.7#0']);
  });

  it("keeps each host's budget to itself: a flooding host holds back no other host's handshake", () => {
    const budget = new HandshakeBudget(LIMITS, Date.now);
    const started: string[] = [];
    admitMany(budget, '198.51.100.7', 50, started);
    admitMany(budget, '2001:db8:1:2::/64', 1, started);
    expect(started).toContain('2001:db8:1:2::/64#0');
  });

  it('holds all hosts together to their common budget, each waiting host starting one connection in turn', () => {
    const budget = new HandshakeBudget({ ...LIMITS, hostBurst: 100, hostPerSecond: 100, allBurst: 4, allPerSecond: 10 }, Date.now);
    const started: string[] = [];
    admitMany(budget, '203.0.113.1', 10, started, 'a');
    admitMany(budget, '203.0.113.2', 10, started, 'b');
    expect(started).toEqual(['a#0', 'a#1', 'a#2', 'a#3']);
    // A new host comes behind the two waiting ones: a turn of each, not the flood's length.
    admitMany(budget, '203.0.113.3', 1, started, 'c');
    vi.advanceTimersByTime(100);
    expect(started.slice(4)).toEqual(['a#4']);
    vi.advanceTimersByTime(200);
    expect(started.slice(4)).toEqual(['a#4', 'b#0', 'c#0']);
    vi.advanceTimersByTime(1000);
    expect(started.slice(7)).toEqual(['a#5', 'b#1', 'a#6', 'b#2', 'a#7', 'b#3', 'a#8', 'b#4', 'a#9', 'b#5']);
  });

  it('lets a host that showed a device key through at once, with what it had waiting, until knownForMs after its proof', () => {
    const budget = new HandshakeBudget(LIMITS, Date.now);
    const started: string[] = [];
    admitMany(budget, '198.51.100.7', 5, started);
    expect(started).toHaveLength(3);
    budget.known('198.51.100.7');
    expect(started).toHaveLength(5);
    expect(budget.waiting).toBe(0);
    admitMany(budget, '198.51.100.7', 20, started, 'again');
    expect(started).toHaveLength(25);
    vi.advanceTimersByTime(60_001);
    admitMany(budget, '198.51.100.7', 5, started, 'later');
    expect(started.filter((s) => s.startsWith('later'))).toHaveLength(3);
  });

  it('spends no turn on a connection closed while it waited, its close come or not', () => {
    const budget = new HandshakeBudget(LIMITS, Date.now);
    const started: string[] = [];
    const sockets = admitMany(budget, '198.51.100.7', 6, started);
    sockets[3]!.destroy();
    sockets[4]!.close();
    expect(budget.waiting).toBe(2);
    vi.advanceTimersByTime(500);
    expect(started.at(-1)).toBe('198.51.100.7#5');
    expect(budget.waiting).toBe(0);
    sockets[3]!.close();
    expect(budget.waiting).toBe(0);
  });

  it("keeps no closed connection in a host's line, however many a flood opens and the gate closes", () => {
    const budget = new HandshakeBudget(LIMITS, Date.now);
    const started: string[] = [];
    const sockets = admitMany(budget, '198.51.100.7', 10_000, started);
    expect(budget.waiting).toBe(10_000 - 3);
    for (const s of sockets.slice(3, -1)) s.close();
    expect(budget.waiting).toBe(1);
    vi.advanceTimersByTime(500);
    expect(started.at(-1)).toBe('198.51.100.7#9999');
    expect(budget.waiting).toBe(0);
  });

  it('never holds a client on the loopback', () => {
    const budget = new HandshakeBudget(LIMITS, Date.now);
    const started: string[] = [];
    admitMany(budget, '127.0.0.1', 20, started);
    admitMany(budget, '0:0:0:0::/64', 20, started);
    expect(started).toHaveLength(40);
    expect(budget.held).toBe(0);
  });

  it('puts hosts past maxHosts in one shared budget, and forgets a host once its budget is full again', () => {
    const budget = new HandshakeBudget(LIMITS, Date.now);
    const started: string[] = [];
    for (let i = 0; i < 4; i++) admitMany(budget, `198.51.100.${i}`, 3, started);
    expect(started).toHaveLength(12);
    // Every budget spent: the fifth and sixth hosts share one, three handshakes between them.
    admitMany(budget, '198.51.100.4', 2, started);
    admitMany(budget, '198.51.100.5', 2, started);
    expect(started.filter((s) => /\.(4|5)#/.test(s))).toEqual(['198.51.100.4#0', '198.51.100.4#1', '198.51.100.5#0']);
    // Full again after 1.5 s: the first four are forgotten and a new host has a budget of its own.
    vi.advanceTimersByTime(1500);
    const fresh: string[] = [];
    admitMany(budget, '198.51.100.6', 3, fresh);
    expect(fresh).toHaveLength(3);
  });
});
