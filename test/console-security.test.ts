import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleClient } from './support/console-client.js';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';

const PASSWORD = 'console-test-password-0123';

let gw: TestGateway;
let https: string;
let plain: string;

beforeAll(async () => {
  gw = await startTestGateway({ CONSOLE_PASSWORD: PASSWORD });
  https = `https://127.0.0.1:${gw.gateway.httpsPort}`;
  plain = gw.url;
});
afterAll(() => gw.stop());

const loggedIn = async (base = https): Promise<ConsoleClient> => {
  const client = new ConsoleClient(base);
  const answer = await client.login(PASSWORD);
  expect(answer.status).toBe(303);
  await client.request('/console/keys');
  return client;
};

const keyFile = () => {
  try {
    return readFileSync(gw.gateway.keys.path, 'utf8');
  } catch {
    return '';
  }
};

describe('console sessions', () => {
  it('sets the session cookie HttpOnly, Secure and SameSite=Strict under the __Host- prefix over HTTPS', async () => {
    const client = new ConsoleClient(https);
    await client.request('/console/login');
    const answer = await client.submitLogin(PASSWORD, '/console/devices');
    expect(answer.status).toBe(303);
    expect(answer.location).toBe('/console/devices');
    const cookie = answer.headers.getSetCookie().find((c) => c.startsWith('__Host-harbor_console='))!;
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; Secure/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).toMatch(/; Path=\//);
    expect(cookie).not.toMatch(/Domain=/i);
  });

  it('over plain HTTP on loopback: HttpOnly and SameSite=Strict, without Secure (a browser would drop it)', async () => {
    const client = new ConsoleClient(plain);
    const answer = await client.login(PASSWORD);
    const cookie = answer.headers.getSetCookie().find((c) => c.startsWith('harbor_console='))!;
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).not.toMatch(/Secure/);
    expect((await client.request('/console/')).status).toBe(200);
  });

  it('sends a browser without a session, or with a made-up or ended one, to the login page', async () => {
    const anonymous = new ConsoleClient(https);
    for (const path of [
      '/console/',
      '/console/devices',
      '/console/keys',
      '/console/dead-letters',
      '/console/settings',
      '/console/certificate.pem',
    ]) {
      const answer = await anonymous.request(path);
      expect(answer.status, path).toBe(303);
      expect(answer.location).toBe(`/console/login?next=${encodeURIComponent(path)}`);
    }
    anonymous.cookies.set('__Host-harbor_console', 'made-up-token-of-the-right-length-000000000');
    expect((await anonymous.request('/console/')).status).toBe(303);

    const client = await loggedIn();
    const stolen = client.cookies.get('__Host-harbor_console')!;
    expect((await client.post('/console/logout', [])).status).toBe(303);
    const replay = new ConsoleClient(https);
    replay.cookies.set('__Host-harbor_console', stolen);
    expect((await replay.request('/console/')).status).toBe(303);
  });

  it('never lets a device key in: not as the password, not as X-API-Key', async () => {
    const client = new ConsoleClient(https);
    const answer = await client.login(TEST_KEY);
    expect(answer.status).toBe(401);
    expect(answer.html).toContain('not the console password');
    expect(client.cookies.has('__Host-harbor_console')).toBe(false);
    const withKey = await client.request('/console/', { headers: { 'x-api-key': TEST_KEY, authorization: `Bearer ${TEST_KEY}` } });
    expect(withKey.status).toBe(303);
  });

  it('answers wrong passwords before their turn 429 at once, with Retry-After, and takes the right one after it', async () => {
    // A login clears this address of the earlier tests' wrong passwords.
    expect((await new ConsoleClient(https).login(PASSWORD)).status).toBe(303);
    const client = new ConsoleClient(https);
    await client.request('/console/login');
    const started = Date.now();
    const guesses = await Promise.all([1, 2, 3].map(() => client.submitLogin('guess')));
    expect(guesses.map((a) => a.status).sort()).toEqual([401, 429, 429]);
    // Nothing is held open for its turn.
    expect(Date.now() - started).toBeLessThan(2000);
    const throttled = guesses.find((a) => a.status === 429)!;
    expect(throttled.html).toContain('Too many login attempts from this address');
    const retryAfterS = Number(throttled.headers.get('retry-after'));
    expect(retryAfterS).toBeGreaterThanOrEqual(1);
    expect((await client.submitLogin(PASSWORD)).status).toBe(429);
    await new Promise((resolve) => setTimeout(resolve, retryAfterS * 1000));
    expect((await client.submitLogin(PASSWORD)).status).toBe(303);
  });
});

describe('console forms', () => {
  const addKey = (client: ConsoleClient, name: string, csrf?: string | null) => client.post('/console/keys', [['name', name]], csrf);

  it('refuse a form without the session token, with another session token, or from another site', async () => {
    const client = await loggedIn();
    const other = await loggedIn();
    const before = keyFile();
    expect((await addKey(client, 'no-token', null)).status).toBe(403);
    expect((await addKey(client, 'empty-token', '')).status).toBe(403);
    expect((await addKey(client, 'other-session', other.csrf)).status).toBe(403);
    const crossSite = await client.request('/console/keys', {
      form: [
        ['_csrf', client.csrf!],
        ['name', 'cross-site'],
      ],
      headers: { origin: 'https://evil.example' },
    });
    expect(crossSite.status).toBe(403);
    const fetchedCrossSite = await client.request('/console/keys', {
      form: [
        ['_csrf', client.csrf!],
        ['name', 'fetch-cross-site'],
      ],
      headers: { 'sec-fetch-site': 'cross-site' },
    });
    expect(fetchedCrossSite.status).toBe(403);
    expect(keyFile()).toBe(before);

    const made = await addKey(client, 'same-site');
    expect(made.status).toBe(201);
    expect(keyFile()).toMatch(/^same-site /m);
  });

  it('refuse a login form without its own token, or from another site, even with the right password', async () => {
    const client = new ConsoleClient(https);
    await client.request('/console/login');
    const noToken = await client.request('/console/login', { form: [['password', PASSWORD]] });
    expect(noToken.status).toBe(403);
    const fresh = new ConsoleClient(https);
    const forged = await fresh.request('/console/login', {
      form: [
        ['_login', client.loginToken!],
        ['password', PASSWORD],
      ],
    });
    expect(forged.status).toBe(403);
    const crossSite = await client.request('/console/login', {
      form: [
        ['_login', client.loginToken!],
        ['password', PASSWORD],
      ],
      headers: { origin: 'null' },
    });
    expect(crossSite.status).toBe(403);
    expect(client.cookies.has('__Host-harbor_console')).toBe(false);
  });

  it('show a new key once, never store or show it again, and send it back to no later page', async () => {
    const client = await loggedIn();
    const made = await client.post('/console/keys', [
      ['name', 'shown-once'],
      ['ship_prefix', 'buoy-'],
    ]);
    expect(made.status).toBe(201);
    expect(made.headers.get('cache-control')).toBe('no-store');
    const key = /id="new-key"[^>]*value="([^"]+)"/.exec(made.html)?.[1];
    expect(key).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(keyFile()).not.toContain(key);
    for (const path of ['/console/keys', '/console/', '/console/devices', '/console/settings']) {
      expect((await client.request(path)).html, path).not.toContain(key);
    }
    const posted = await fetch(`${gw.url}/api/v2/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key! },
      body: JSON.stringify({ ship_id: 'buoy-9', cargo_id: 'level', value: 1 }),
    });
    expect(posted.status).toBe(200);
  });

  it('answer every page with a strict Content-Security-Policy and nothing inline for it to block', async () => {
    const client = await loggedIn();
    for (const path of ['/console/login', '/console/', '/console/devices', '/console/keys', '/console/dead-letters', '/console/settings']) {
      const page = await client.request(path);
      const csp = page.headers.get('content-security-policy')!;
      expect(csp, path).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).toContain("frame-ancestors 'none'");
      expect(page.headers.get('x-content-type-options')).toBe('nosniff');
      expect(page.html).not.toMatch(/<script(?![^>]*\bsrc=)/);
      expect(page.html).not.toMatch(/\sstyle=|\son[a-z]+=/);
    }
  });

  it('masks every secret on the settings page', async () => {
    const client = await loggedIn();
    const page = await client.request('/console/settings');
    expect(page.html).not.toContain(PASSWORD);
    expect(page.html).not.toContain(TEST_KEY);
    expect(page.html).toMatch(/CONSOLE_PASSWORD<\/th><td class="muted" data-label="Value">set \(not shown\)/);
    expect(page.html).toContain('configuration valid');
  });
});
