import { spawn, spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { connect as connectTcp } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildEsp32TlsClient } from '../scripts/lib/esp32-tls-client/build.mjs';
import { TEST_KEY } from './support/gateway.js';
import { LatencyLink } from './support/latency-link.js';
import { sql, uniqueTable, waitForCount } from './support/questdb-sql.js';
import { openTls, tlsGatewayForTests } from './support/tls-gateway.js';

const HEADERS_TIMEOUT_MS = 1000;
const table = uniqueTable('tls');
const gateway = tlsGatewayForTests('tls', {
  QUESTDB_TABLE: table,
  HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
  REQUEST_TIMEOUT_MS: '1500',
});
let port: number;
let httpsPort: number;
let dataDir: string;
let esp32Client: string;

beforeAll(() => {
  esp32Client = buildEsp32TlsClient();
  ({ port, httpsPort, dataDir } = gateway());
});

const run = (command: string, args: string[], input = '') => {
  const result = spawnSync(command, args, { input, encoding: 'utf8', timeout: 15_000 });
  return { status: result.status, out: `${result.stdout}${result.stderr}` };
};

const esp32 = (targetPort: number, ...args: string[]) =>
  run(esp32Client, ['127.0.0.1', String(targetPort), '/api/v2/ingest', TEST_KEY, ...args]);

/** One TLS version offered by openssl s_client; security level 0 so the client offers old versions at all. */
const handshake = (targetPort: number, version: string, more: string[] = []) =>
  run('openssl', ['s_client', '-connect', `127.0.0.1:${targetPort}`, `-${version}`, '-cipher', 'DEFAULT@SECLEVEL=0', ...more], '');

describe('the Arduino/ESP32 SDK through mbedTLS', () => {
  it.each([
    ['the HTTPS port', () => httpsPort, 'esp32-https'],
    ['the plain port (http:// URL, TLS anyway)', () => port, 'esp32-plain'],
  ])('stores single and batch pushes sent to %s', async (_name, targetPort, ship) => {
    const single = esp32(targetPort(), ship, 'single', 'temperature', '23.7');
    expect(single.status, single.out).toBe(0);
    expect(single.out).toMatch(/^TLSv1\.2 TLS-ECDHE-ECDSA-WITH-AES-(128|256)-GCM-SHA(256|384)\n/);
    expect(single.out).toMatch(/HTTP\/1\.1 200 OK/);
    expect(single.out).toContain('"status":"Data received and queued"');
    const batch = esp32(targetPort(), ship, 'batch', 'humidity', '41.2', 'pressure', '1013.25');
    expect(batch.status, batch.out).toBe(0);
    expect(batch.out).toContain('"count":2');

    expect(await waitForCount(`SELECT count() FROM "${table}" WHERE ship_id = '${ship}'`, 3)).toBe(3);
    const rows = await sql<[string, number]>(`SELECT cargo_id, value FROM "${table}" WHERE ship_id = '${ship}' ORDER BY cargo_id`);
    // 32-bit floats widened to double, as the SDK sends them.
    expect(rows.dataset).toEqual([
      ['humidity', 41.20000076293945],
      ['pressure', 1013.25],
      ['temperature', 23.700000762939453],
    ]);
  });
});

describe('a misconfigured ESP32 over a link with latency', () => {
  // 50 ms each way: a weak Wi-Fi or a cellular link.
  const ONE_WAY_MS = 50;
  let link: LatencyLink;
  beforeAll(async () => {
    link = await LatencyLink.start(httpsPort, ONE_WAY_MS);
  });
  afterAll(() => link.close());

  /** The SDK's whole send, as its own process (the link runs in this one); killed after 20 s. */
  const send = (key: string, value: number): Promise<{ status: number | null; log: string; ms: number }> =>
    new Promise((resolve) => {
      const started = Date.now();
      const child = spawn(
        esp32Client,
        ['127.0.0.1', String(link.port), '/api/v2/ingest', key, 'esp32-wrong-key', 'single', 'temperature', String(value)],
        { timeout: 20_000 },
      );
      let log = '';
      child.stdout.on('data', (chunk: Buffer) => (log += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
      child.on('close', (status) => resolve({ status, log, ms: Date.now() - started }));
    });

  it('sees its 401 on the first attempt of every reading, within HTTPClient’s 5 s, and stops retrying', async () => {
    // More readings than the wrong-key delay needs to reach its cap from an address.
    for (let reading = 1; reading <= 10; reading++) {
      const { status, log, ms } = await send('misconfigured-key-0123456789', reading);
      expect(log, `reading ${reading}`).not.toContain('read Timeout');
      expect(log.match(/\[HTTP\] Attempt/g), `reading ${reading}:\n${log}`).toHaveLength(1);
      expect(log).toContain('[HTTP] Response code: 401');
      expect(log).toContain('[HTTP] Client error. Will not retry.');
      expect(log).toContain('"type":"invalid_api_key"');
      expect(status).toBe(0);
      expect(ms).toBeLessThan(5000);
    }
  });

  it('with the right key stores at once, as the wrong key from the same address is still slowed', async () => {
    const { status, log } = await send(TEST_KEY, 1);
    expect(log.match(/\[HTTP\] Attempt/g)).toHaveLength(1);
    expect(log).toContain('[HTTP] Response code: 200');
    expect(status).toBe(0);
  });
});

describe('protocol versions', () => {
  it.each(['tls1', 'tls1_1'])('refuses %s on both ports', (version) => {
    for (const target of [httpsPort, port]) {
      const result = handshake(target, version);
      expect(result.status).not.toBe(0);
      expect(result.out).toMatch(/alert protocol version|no protocols available|unsupported protocol/);
    }
  });

  it.each([
    ['tls1_2', 'TLSv1.2'],
    ['tls1_3', 'TLSv1.3'],
  ])('negotiates %s on both ports', (version, protocol) => {
    for (const target of [httpsPort, port]) {
      const result = handshake(target, version);
      // The summary line of a completed handshake; s_client may quit before printing the session.
      expect(result.out).toContain(`New, ${protocol}, Cipher is `);
    }
  });

  it('refuses TLS 1.2 suites without ECDHE and AEAD', () => {
    const result = run(
      'openssl',
      ['s_client', '-connect', `127.0.0.1:${httpsPort}`, '-tls1_2', '-cipher', 'AES128-SHA:ECDHE-ECDSA-AES128-SHA'],
      '',
    );
    expect(result.out).toMatch(/handshake failure/);
  });
});

describe('curl and plain HTTP', () => {
  it('answers curl -k on both ports and plain HTTP on the plain port', () => {
    const body = JSON.stringify({ ship_id: 'curl', cargo_id: 'c', value: 1 });
    for (const url of [`https://127.0.0.1:${httpsPort}`, `https://127.0.0.1:${port}`, `http://127.0.0.1:${port}`]) {
      const result = run('curl', [
        '-sk',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        '-H',
        `X-API-Key: ${TEST_KEY}`,
        '-H',
        'Content-Type: application/json',
        '-d',
        body,
        `${url}/api/v2/ingest`,
      ]);
      expect(result.out, url).toBe('200');
    }
  });

  it('answers curl -k --http1.0, which offers only ALPN http/1.0, on both ports', () => {
    const body = JSON.stringify({ ship_id: 'curl-http10', cargo_id: 'c', value: 1 });
    for (const target of [httpsPort, port]) {
      const result = run('curl', [
        '-sk',
        '--http1.0',
        '-w',
        '\n%{http_code}',
        '-H',
        `X-API-Key: ${TEST_KEY}`,
        '-d',
        body,
        `https://127.0.0.1:${target}/api/v2/ingest`,
      ]);
      expect(result.out, String(target)).toMatch(/"status":"Data received and queued".*\n200$/s);
    }
    const offered = handshake(httpsPort, 'tls1_2', ['-alpn', 'http/1.0']);
    expect(offered.out).toContain('ALPN protocol: http/1.0');
    const both = handshake(httpsPort, 'tls1_2', ['-alpn', 'http/1.0,http/1.1']);
    expect(both.out).toContain('ALPN protocol: http/1.1');
  });

  it('refuses plain HTTP on the HTTPS port without taking the gateway down', async () => {
    const result = run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${httpsPort}/healthz`]);
    expect(result.out).not.toBe('200');
    expect((await fetch(`${gateway().gw.url}/healthz`)).status).toBe(200);
  });
});

/** Connects, sends `bytes`, and resolves with how long the gateway kept the connection open. */
function stall(targetPort: number, bytes: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connectTcp(targetPort, '127.0.0.1', () => socket.write(bytes));
    socket.resume();
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(Date.now() - started));
    setTimeout(() => {
      socket.destroy();
      reject(new Error('the gateway kept a stalled connection open for 10 s'));
    }, 10_000);
  });
}

// The start of a ClientHello: a handshake record header that promises more than it sends.
const PARTIAL_CLIENT_HELLO = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]);

describe('stalled clients are bounded like a slow header', () => {
  it.each([
    ['a silent connection to the HTTPS port', () => httpsPort, Buffer.alloc(0)],
    ['half a ClientHello to the HTTPS port', () => httpsPort, PARTIAL_CLIENT_HELLO],
    ['a silent connection to the plain port', () => port, Buffer.alloc(0)],
    ['half a ClientHello to the plain port', () => port, PARTIAL_CLIENT_HELLO],
  ])('closes %s', async (_name, targetPort, bytes) => {
    const openMs = await stall(targetPort(), bytes);
    expect(openMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 100);
    // Node checks its timeouts on an interval; a shared machine adds to it.
    expect(openMs).toBeLessThan(HEADERS_TIMEOUT_MS * 2 + 3000);
  });

  it('answers 408 to a TLS client that never finishes its headers', async () => {
    const socket = await openTls(httpsPort);
    let data = '';
    socket.on('data', (chunk: Buffer) => (data += chunk.toString()));
    socket.write('POST /api/v2/ingest HTTP/1.1\r\nHost: x\r\n');
    await new Promise((resolve) => socket.once('close', resolve));
    expect(data).toMatch(/^HTTP\/1\.1 408 /);
  });
});

describe('the generated certificate', () => {
  it('is kept in DATA_DIR/tls with a private key only the gateway reads', () => {
    expect(statSync(join(dataDir, 'tls', 'key.pem')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, 'tls')).mode & 0o777).toBe(0o700);
  });

  it('has one fingerprint in the start log, /status, the CLI and the handshake', async () => {
    const logged = (gateway().gw.logs.find((line) => line.event === 'started')!.tls as { fingerprintSha256: string }).fingerprintSha256;
    expect(logged).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    const status = (await (await fetch(`${gateway().gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
      tls: { fingerprintSha256: string; source: string };
    };
    expect(status.tls).toMatchObject({ fingerprintSha256: logged, source: 'self-signed' });
    const cli = run('env', [`DATA_DIR=${dataDir}`, process.execPath, inject('bundlePath'), 'tls-certificate', '--fingerprint']);
    expect(cli.status).toBe(0);
    expect(cli.out.trim()).toBe(logged);
    const socket = await openTls(port);
    expect(socket.getPeerX509Certificate()!.fingerprint256).toBe(logged);
    socket.destroy();
  });

  it('names the host and localhost and is read by openssl', () => {
    const text = run('openssl', ['x509', '-in', join(dataDir, 'tls', 'cert.pem'), '-noout', '-text']);
    expect(text.status).toBe(0);
    expect(text.out).toMatch(/DNS:localhost/);
    expect(text.out).toMatch(/IP Address:127\.0\.0\.1/);
    expect(text.out).toMatch(/ecdsa-with-SHA256/);
    expect(text.out).toMatch(/TLS Web Server Authentication/);
  });
});
