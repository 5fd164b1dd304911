// The board's look at the central tier's address (harbor-update check-url) against a real HTTP
// server: what it says in the journal when there is no bundle, and when the server fails.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { checkUrl } from '../../appliance/board/update.mjs';
import { tempDir } from '../support/temp-dir.js';

let server: Server;
let base = '';
const answers = new Map<string, number>();

beforeAll(async () => {
  server = createServer((request, response) => {
    response.statusCode = answers.get(request.url ?? '') ?? 404;
    response.end();
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((done) => server.close(() => done())));
afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

/** What checkUrl writes (the journal, under systemd), and its exit status. */
async function check(url: string): Promise<{ status: number; lines: string[] }> {
  const lines: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((text) => {
    lines.push(
      ...String(text)
        .split('\n')
        .filter((line) => line !== ''),
    );
    return true;
  });
  const status = await checkUrl(url, tempDir('update-url'));
  vi.restoreAllMocks();
  return { status, lines };
}

describe('the central tier’s address (UPDATE_URL)', () => {
  it('says in one line, at the normal level, that there is no bundle yet, and succeeds', async () => {
    vi.stubEnv('JOURNAL_STREAM', '8:1234');
    const url = `${base}/site.raucb`;
    const { status, lines } = await check(url);
    expect(status).toBe(0);
    expect(lines).toEqual([`harbor-update: UPDATE_URL ${url}: no bundle there (404); nothing to install`]);
  });

  it('names a failing server once, as a warning in the journal, and fails', async () => {
    vi.stubEnv('JOURNAL_STREAM', '8:1234');
    answers.set('/broken.raucb', 503);
    const url = `${base}/broken.raucb`;
    const { status, lines } = await check(url);
    expect(status).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^<4>harbor-update: UPDATE_URL \S+: the server answered 503 Service Unavailable; trying again/);
    expect(lines[0]?.split(url)).toHaveLength(2);
  });

  it('says why an address cannot be reached, without a priority prefix outside systemd', async () => {
    vi.stubEnv('JOURNAL_STREAM', '');
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, '127.0.0.1', done));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((done) => closed.close(() => done()));
    const { status, lines } = await check(`http://127.0.0.1:${port}/site.raucb`);
    expect(status).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^harbor-update: UPDATE_URL \S+: fetch failed: .*ECONNREFUSED/);
  });
});
