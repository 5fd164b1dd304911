import { connect as connectTcp, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_KEY, type TestGateway } from './support/gateway.js';
import { sql, waitForCount } from './support/questdb-sql.js';

let gw: TestGateway;
let port: number;

beforeAll(async () => {
  gw = await startTestGateway();
  port = gw.gateway.port;
});
afterAll(() => gw.stop());

/** Sends `request` as it is and resolves with everything the gateway wrote until it closed. */
function exchange(request: string, over: 'tcp' | 'tls' = 'tcp', targetPort = port): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket: Socket =
      over === 'tcp'
        ? connectTcp(targetPort, '127.0.0.1', () => socket.write(request))
        : connectTls({ host: '127.0.0.1', port: targetPort, rejectUnauthorized: false, ALPNProtocols: ['http/1.0'] }, () =>
            socket.write(request),
          );
    let data = '';
    socket.on('data', (chunk: Buffer) => (data += chunk.toString()));
    socket.on('error', reject);
    socket.on('close', () => resolve(data));
    setTimeout(() => socket.destroy(new Error(`no close within 5 s; got ${data.slice(0, 200)}`)), 5000);
  });
}

/** Status and parsed body of a raw answer; the body must be JSON. */
function parse(answer: string): { version: string; status: number; body: { message: string; details: { type: string }[] } } {
  const match = /^HTTP\/(1\.[01]) (\d{3}) /.exec(answer);
  expect(match, answer.slice(0, 200)).not.toBeNull();
  const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
  return { version: match![1]!, status: Number(match![2]), body: JSON.parse(body) };
}

const post = (version: string, body: string, headers: string[]): string =>
  [`POST /api/v2/ingest HTTP/${version}`, ...headers, `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n');

describe('HTTP/1.0 without a Host header, as modem and AT-command clients send it', () => {
  it.each(['tcp', 'tls'] as const)('is stored over %s', async (over) => {
    const ship = `http10-${over}`;
    const body = JSON.stringify({ ship_id: ship, cargo_id: 'temperature', value: 21.5 });
    const targetPort = over === 'tcp' ? port : gw.gateway.httpsPort;
    const answer = parse(await exchange(post('1.0', body, [`X-API-Key: ${TEST_KEY}`, 'Content-Type: application/json']), over, targetPort));
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'Data received and queued', ship_id: ship });
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = '${ship}'`, 1)).toBe(1);
    expect((await sql<[number]>(`SELECT value FROM "${gw.table}" WHERE ship_id = '${ship}'`)).dataset).toEqual([[21.5]]);
  });

  it('gets the problem-details body with a refusal', async () => {
    const answer = parse(await exchange(post('1.0', '{"ship_id":"s","cargo_id":"c","value":1}', ['X-API-Key: wrong-key-0123456789'])));
    expect(answer.status).toBe(401);
    expect(answer.body.details[0]).toMatchObject({ loc: ['header', 'x-api-key'], type: 'invalid_api_key' });
  });
});

describe('refusals before a request reaches the routes carry the problem-details body', () => {
  it('HTTP/1.1 without Host, which HTTP/1.1 requires', async () => {
    const answer = parse(await exchange(post('1.1', '{}', [`X-API-Key: ${TEST_KEY}`])));
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      message: 'Missing Host header',
      details: [{ loc: ['header', 'host'], msg: 'HTTP/1.1 requires a Host header', type: 'missing' }],
    });
  });

  it('a request line that is not HTTP', async () => {
    const answer = parse(await exchange('HELLO THERE\r\n\r\n'));
    expect(answer.status).toBe(400);
    expect(answer.body.message).toBe('Malformed HTTP request');
    expect(answer.body.details[0]!.type).toBe('http_invalid');
  });

  it('a Host header that is no host', async () => {
    const answer = parse(await exchange(post('1.1', '{}', ['Host: a b/c', 'Connection: close', `X-API-Key: ${TEST_KEY}`])));
    expect(answer.status).toBe(400);
    expect(answer.body.details[0]!.type).toBe('http_invalid');
  });

  it('headers over 16 KiB', async () => {
    const answer = parse(await exchange(post('1.1', '{}', ['Host: gw', `X-Padding: ${'x'.repeat(20_000)}`])));
    expect(answer.status).toBe(431);
    expect(answer.body.details[0]!.type).toBe('headers_too_large');
  });
});
