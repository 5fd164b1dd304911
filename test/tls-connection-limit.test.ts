import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectTcp, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { TEST_KEY } from './support/gateway.js';
import { spawnGateway, type GatewayProcess } from './support/process.js';
import { uniqueTable } from './support/questdb-sql.js';

const dataDir = mkdtempSync(join(tmpdir(), 'harbor-tls-limit-'));
let gw: GatewayProcess;
let port: number;
let httpsPort: number;

beforeAll(async () => {
  gw = await spawnGateway({
    API_KEY: TEST_KEY,
    DATA_DIR: dataDir,
    QUESTDB_URL: inject('questdbUrl'),
    QUESTDB_TABLE: uniqueTable('tlslimit'),
    HEALTH_REPORT: 'false',
    MAX_CONNECTIONS: '3',
    KEEP_ALIVE_TIMEOUT_MS: '60000',
  });
  port = Number(new URL(gw.url).port);
  httpsPort = Number(
    String(gw.logs.find((line) => line.event === 'started')!.httpsAddress)
      .split(':')
      .pop(),
  );
});
afterAll(async () => {
  gw.child.kill('SIGTERM');
  expect((await gw.exited).code).toBe(0);
  rmSync(dataDir, { recursive: true, force: true });
});

const openTls = (targetPort: number): Promise<TLSSocket> =>
  new Promise((resolve, reject) => {
    const socket = connectTls({ host: '127.0.0.1', port: targetPort, rejectUnauthorized: false }, () => resolve(socket));
    socket.once('error', reject);
  });

/** Resolves true when the gateway closes the connection before answering a request on it. */
const refused = (targetPort: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket: Socket = connectTcp(targetPort, '127.0.0.1', () => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
    let data = '';
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString();
      if (data.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(false);
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(data === ''));
  });

it('counts TLS connections of both ports against one MAX_CONNECTIONS', async () => {
  const held = [await openTls(httpsPort), await openTls(port), await openTls(httpsPort)];
  expect(await refused(port)).toBe(true);
  expect(await refused(httpsPort)).toBe(true);
  const closed = held.pop()!;
  await new Promise((resolve) => {
    closed.once('close', resolve);
    closed.destroy();
  });
  // The gateway notices the close asynchronously; then a connection fits again.
  let answered = false;
  for (const deadline = Date.now() + 10_000; !answered && Date.now() < deadline; ) answered = !(await refused(port));
  expect(answered).toBe(true);
  for (const socket of held) socket.destroy();
});
