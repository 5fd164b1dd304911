import { describe, expect, it } from 'vitest';
import { fromSameOrigin, tokensMatch } from './csrf.js';
import { LoginThrottle } from './login-throttle.js';
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
  it('spaces an address’s attempts further with each failure, lets other addresses be, and forgets after a success', () => {
    let now = 0;
    const throttle = new LoginThrottle(() => now);
    expect(throttle.reserve('a')).toBe(0);
    throttle.failed('a');
    // Three attempts at once queue behind each other.
    const waits = [throttle.reserve('a'), throttle.reserve('a'), throttle.reserve('a')];
    expect(waits[0]).toBe(500);
    expect(waits[1]!).toBeGreaterThan(waits[0]!);
    expect(waits[2]!).toBeGreaterThan(waits[1]!);
    expect(throttle.reserve('b')).toBe(0);
    for (let i = 0; i < 20; i++) throttle.failed('a');
    now = 100_000;
    expect(throttle.reserve('a')).toBeLessThanOrEqual(8_000);
    throttle.succeeded('a');
    expect(throttle.reserve('a')).toBe(0);
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
