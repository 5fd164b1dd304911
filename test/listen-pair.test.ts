import { once } from 'node:events';
import { type AddressInfo, connect, createServer } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { ConnectionGate } from '../src/http/connection-gate.js';

describe('a plain and a TLS port listening through one gate', () => {
  it('gives the plain port back when the TLS port is taken, so a failed start holds no port', async () => {
    const taken = createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const plain = createServer((socket) => socket.end('plain'));
    const secure = createTlsServer({});
    try {
      const gate = new ConnectionGate({ maxConnections: 10, maxUnproven: 10, unprovenTimeoutMs: 1000 });
      const takenPort = (taken.address() as AddressInfo).port;
      await expect(gate.listenPair(plain, secure, '127.0.0.1', { plain: 0, tls: takenPort })).rejects.toMatchObject({ code: 'EADDRINUSE' });
      expect(plain.listening).toBe(false);
    } finally {
      taken.close();
    }
  });

  it('answers clear text on the plain port and counts its connections against the gate', async () => {
    const gate = new ConnectionGate({ maxConnections: 1, maxUnproven: 1, unprovenTimeoutMs: 1000 });
    // A connection that said hello counts as a device's here: only unproven ones make room for others.
    const plain = createServer((socket) => {
      gate.prove(socket);
      socket.write('plain');
    });
    const secure = createTlsServer({});
    const ports = await gate.listenPair(plain, secure, '127.0.0.1', { plain: 0, tls: 0 });
    try {
      const first = connect(ports.plain, '127.0.0.1');
      first.write('hello');
      const [answer] = (await once(first, 'data')) as [Buffer];
      expect(answer.toString()).toBe('plain');
      // The gate admits one connection: the second is closed without a byte while the first is open.
      const second = connect(ports.plain, '127.0.0.1');
      const received: Buffer[] = [];
      second.on('data', (chunk: Buffer) => received.push(chunk));
      second.on('error', () => undefined);
      await once(second, 'close');
      expect(Buffer.concat(received).length).toBe(0);
      first.destroy();
    } finally {
      plain.close();
      secure.close();
    }
  });
});
