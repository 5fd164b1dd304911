import { connect as connectTcp, type Socket } from 'node:net';
import { expect, it } from 'vitest';
import { TEST_KEY } from './support/gateway.js';
import { openTls, tlsGatewayForTests } from './support/tls-gateway.js';

const gateway = tlsGatewayForTests('tls-limit', { MAX_CONNECTIONS: '3', MAX_UNPROVEN_CONNECTIONS: '1', KEEP_ALIVE_TIMEOUT_MS: '60000' });

/** A TLS connection that showed a device key (a keyed request, answered) and stays open: a device's. */
async function deviceConnection(port: number) {
  const socket = await openTls(port);
  socket.write(`GET /status HTTP/1.1\r\nHost: x\r\nX-API-Key: ${TEST_KEY}\r\n\r\n`);
  await new Promise((resolve) => socket.once('data', resolve));
  return socket;
}

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

it("counts devices' TLS connections of both ports against one MAX_CONNECTIONS", async () => {
  const { port, httpsPort } = gateway();
  const held = [await deviceConnection(httpsPort), await deviceConnection(port), await deviceConnection(httpsPort)];
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
