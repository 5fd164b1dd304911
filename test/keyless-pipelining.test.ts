import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.stop());

it('closes a connection that pipelines requests without a device key past its share, and the devices are answered meanwhile', async () => {
  const { port } = new URL(gw.url);
  const socket = connect(Number(port), '127.0.0.1');
  let received = '';
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString();
  });
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.on('error', () => undefined);
  // 5,000 requests in a few reads: before the lane had a bound, each waited in it, held in memory.
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(5000));
  const device = await gw.post('/api/v2/ingest', { time: '2024-01-01T00:00:00Z', ship_id: 's', cargo_id: 'c', value: 1 });
  expect(device.status).toBe(200);
  await closed;
  const answers = received.split('HTTP/1.1 200').length - 1;
  expect(answers).toBeLessThanOrEqual(2);
});
