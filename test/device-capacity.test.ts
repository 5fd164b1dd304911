// No client without a device key takes the devices' capacity: with more idle sockets open than
// MAX_CONNECTIONS and a login flood running, every device request on a new connection (as the
// ESP32 SDK sends them) is answered and stored.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ConsoleClient } from './support/console-client.js';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { waitForCount } from './support/questdb-sql.js';

const MAX_CONNECTIONS = 200;
const IDLE_SOCKETS = 260;

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({
    CONSOLE_PASSWORD: 'capacity-console-password',
    MAX_CONNECTIONS: String(MAX_CONNECTIONS),
    MAX_UNPROVEN_CONNECTIONS: '50',
  });
});
afterAll(() => gw.stop());

/** One reading on a connection of its own, as a device that connects for each request; resolves with the status. */
function devicePost(tls: boolean, i: number): Promise<number> {
  const body = JSON.stringify({
    ship_id: 'capacity-ship',
    cargo_id: tls ? 'tls' : 'plain',
    value: i,
    time: new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString(),
  });
  const port = tls ? gw.gateway.httpsPort : gw.gateway.port;
  const send = tls ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      {
        host: '127.0.0.1',
        port,
        path: '/api/v2/ingest',
        method: 'POST',
        agent: false,
        rejectUnauthorized: false,
        headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY, 'content-length': Buffer.byteLength(body) },
        timeout: 10_000,
      },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.once('timeout', () => req.destroy(new Error('no answer in 10 s')));
    req.once('error', reject);
    req.end(body);
  });
}

it('answers and stores every device request while idle sockets and a login flood take every connection they can', async () => {
  const idle: Socket[] = [];
  let idleClosed = 0;
  for (let i = 0; i < IDLE_SOCKETS; i++) {
    const socket = connect(gw.gateway.port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.once('close', () => (idleClosed += 1));
    idle.push(socket);
  }
  await new Promise((resolve) => setTimeout(resolve, 300));

  // Wrong passwords as fast as the gateway answers them, from several clients at once.
  let flooding = true;
  let attempts = 0;
  const flood = Array.from({ length: 8 }, async () => {
    const client = new ConsoleClient(gw.url);
    await client.request('/console/login');
    while (flooding) {
      await client.submitLogin('wrong-password').catch(() => undefined);
      attempts += 1;
    }
  });

  const statuses: number[] = [];
  for (let i = 0; i < 30; i++) statuses.push(await devicePost(i % 2 === 1, i));
  flooding = false;
  await Promise.all(flood);

  expect(statuses).toEqual(new Array(30).fill(200));
  expect(attempts).toBeGreaterThan(30);
  // The idle sockets made room: more were open than MAX_CONNECTIONS allows.
  expect(idleClosed).toBeGreaterThanOrEqual(IDLE_SOCKETS - 50);
  expect(gw.gateway.stats.acceptedReadings).toBeGreaterThanOrEqual(30);
  await waitForCount(`SELECT count() FROM ${gw.table} WHERE ship_id = 'capacity-ship'`, 30);
  for (const socket of idle) socket.destroy();
}, 60_000);
