import { describe, expect, it } from 'vitest';
import { fromSameOrigin, tokensMatch } from './csrf.js';
import { LoginThrottle } from './login-throttle.js';
import { RequestRate } from './request-rate.js';
import { ConsolePassword } from './password.js';
import { IDLE_MS, LIFETIME_MS, MAX_SESSIONS, SessionStore } from './sessions.js';
import type { Context } from 'hono';

describe('console password', () => {
  it('matches only itself, and nothing while none is set', () => {
    const password = new ConsolePassword('correct horse battery staple');
    expect(password.matches('correct horse battery staple')).toBe(true);
    expect(password.matches('correct horse battery stapl')).toBe(false);
    expect(password.matches('')).toBe(false);
    const none = new ConsolePassword(undefined);
    expect(none.configured).toBe(false);
    expect(none.matches('')).toBe(false);
  });
});

describe('sessions', () => {
  it('are found by their token only, end on logout, when idle too long and when too old', () => {
    let now = 0;
    const store = new SessionStore(() => now);
    const { token, session } = store.create();
    expect(store.find(token)).toBe(session);
    expect(store.find(`${token}x`)).toBeUndefined();
    expect(store.find(session.csrf)).toBeUndefined();
    now += IDLE_MS - 1;
    expect(store.find(token)).toBe(session);
    now += IDLE_MS + 1;
    expect(store.find(token)).toBeUndefined();

    const kept = store.create();
    for (let t = 0; t < LIFETIME_MS; t += IDLE_MS / 2) {
      now += IDLE_MS / 2;
      store.find(kept.token);
    }
    now += 1;
    expect(store.find(kept.token)).toBeUndefined();
    const ended = store.create();
    store.end(ended.token);
    expect(store.find(ended.token)).toBeUndefined();
  });

  it('keep at most MAX_SESSIONS, ending the least recently used', () => {
    const store = new SessionStore(() => 0);
    const first = store.create();
    const second = store.create();
    store.find(first.token);
    for (let i = 0; i < MAX_SESSIONS - 1; i++) store.create();
    expect(store.size).toBe(MAX_SESSIONS);
    expect(store.find(second.token)).toBeUndefined();
    expect(store.find(first.token)).toBeDefined();
  });
});

describe('login throttle', () => {
  it('refuses an address’s attempt before its turn, with the time to wait, spacing turns further with each failure', () => {
    let now = 0;
    const throttle = new LoginThrottle(1000, () => now);
    expect(throttle.take('192.0.2.1')).toEqual({ allowed: true });
    throttle.failed('192.0.2.1');
    // Attempts at once are refused, not queued: nothing is held open.
    expect(throttle.take('192.0.2.1')).toEqual({ allowed: false, retryAfterMs: 500, reason: 'host' });
    now = 499;
    expect(throttle.take('192.0.2.1')).toEqual({ allowed: false, retryAfterMs: 1, reason: 'host' });
    expect(throttle.take('192.0.2.2')).toEqual({ allowed: true });
    now = 500;
    expect(throttle.take('192.0.2.1')).toEqual({ allowed: true });
    throttle.failed('192.0.2.1');
    expect(throttle.take('192.0.2.1')).toMatchObject({ retryAfterMs: 1000 });
    for (let i = 0; i < 20; i++) throttle.failed('192.0.2.1');
    expect(throttle.take('192.0.2.1')).toMatchObject({ retryAfterMs: 8000 });
    throttle.succeeded('192.0.2.1');
    expect(throttle.take('192.0.2.1')).toEqual({ allowed: true });
    // A host forgotten after 15 minutes without an attempt starts afresh.
    throttle.failed('192.0.2.1');
    now += 15 * 60_000 + 1;
    expect(throttle.take('192.0.2.1')).toEqual({ allowed: true });
  });

  it('counts an IPv6 /64 as one host, and an IPv4-mapped address as its IPv4 address', () => {
    let now = 0;
    const throttle = new LoginThrottle(1000, () => now);
    expect(throttle.take('2001:db8:1:2::1')).toEqual({ allowed: true });
    throttle.failed('2001:db8:1:2::1');
    for (const sameHost of ['2001:db8:1:2::2', '2001:0db8:0001:0002:ffff:0:0:9', '2001:DB8:1:2:1:2:3:4', '2001:db8:1:2::5%eth0'])
      expect(throttle.take(sameHost), sameHost).toMatchObject({ allowed: false, reason: 'host' });
    expect(throttle.take('2001:db8:1:3::1')).toEqual({ allowed: true });
    expect(throttle.take('198.51.100.7')).toEqual({ allowed: true });
    throttle.failed('198.51.100.7');
    expect(throttle.take('::ffff:198.51.100.7')).toMatchObject({ allowed: false, reason: 'host' });
    now = 10_000;
    expect(throttle.take('::ffff:198.51.100.7')).toEqual({ allowed: true });
  });

  it('checks at most perMinute attempts in any minute, from however many hosts, and never counts loopback', () => {
    let now = 0;
    const throttle = new LoginThrottle(20, () => now);
    const turns = [];
    for (let i = 0; i < 50; i++) {
      now = i * 100;
      turns.push(throttle.take(`2001:db8:${i.toString(16)}::1`));
    }
    expect(turns.filter((t) => t.allowed)).toHaveLength(20);
    // The 21st is refused until the first of the twenty is a minute old: 60 s after time 0, asked at 2 s.
    expect(turns[20]).toEqual({ allowed: false, retryAfterMs: 58_000, reason: 'everyone' });
    expect(throttle.take('127.0.0.1')).toEqual({ allowed: true });
    expect(throttle.take('::1')).toEqual({ allowed: true });
    now = 60_000;
    expect(throttle.take('198.51.100.1')).toEqual({ allowed: true });
    expect(throttle.take('198.51.100.2')).toMatchObject({ allowed: false, reason: 'everyone', retryAfterMs: 100 });
    // A host refused for its own spacing does not use a turn of everyone's.
    now = 200_000;
    throttle.failed('198.51.100.1');
    expect(throttle.take('198.51.100.1')).toMatchObject({ reason: 'host' });
    for (let i = 0; i < 20; i++) expect(throttle.take(`203.0.113.${i}`)).toEqual({ allowed: true });
  });
});

describe('form checks', () => {
  const context = (headers: Record<string, string>) => ({ req: { header: (name: string) => headers[name] } }) as unknown as Context;

  it('compare tokens exactly', () => {
    expect(tokensMatch('abc', 'abc')).toBe(true);
    expect(tokensMatch('abc', 'abd')).toBe(false);
    expect(tokensMatch('abc', ['abc'])).toBe(false);
    expect(tokensMatch(undefined, 'abc')).toBe(false);
  });

  it('refuse what the browser says came from elsewhere', () => {
    expect(fromSameOrigin(context({ host: 'gw:8443' }))).toBe(true);
    expect(fromSameOrigin(context({ host: 'gw:8443', origin: 'https://gw:8443', 'sec-fetch-site': 'same-origin' }))).toBe(true);
    expect(fromSameOrigin(context({ host: 'gw:8443', origin: 'https://evil.example' }))).toBe(false);
    expect(fromSameOrigin(context({ host: 'gw:8443', origin: 'null' }))).toBe(false);
    expect(fromSameOrigin(context({ host: 'gw:8443', 'sec-fetch-site': 'same-site' }))).toBe(false);
    expect(fromSameOrigin(context({ host: 'gw:8443', 'sec-fetch-site': 'cross-site' }))).toBe(false);
  });
});

describe('request rate', () => {
  it('lets a burst through, then as many a second as it allows', () => {
    let now = 0;
    const rate = new RequestRate(20, 40, () => now);
    const burst = Array.from({ length: 41 }, () => rate.take());
    expect(burst.filter(Boolean)).toHaveLength(40);
    now = 50;
    expect(rate.take()).toBe(true);
    expect(rate.take()).toBe(false);
    now = 10_000;
    expect(Array.from({ length: 50 }, () => rate.take()).filter(Boolean)).toHaveLength(40);
  });
});
