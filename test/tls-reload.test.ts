import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { describe, expect, inject, it } from 'vitest';
import { TEST_KEY } from './support/gateway.js';
import { openTls as openTlsTo, operatorCertificate, tlsGatewayForTests, type OperatorCertificate } from './support/tls-gateway.js';

let certificate: OperatorCertificate;
const gateway = tlsGatewayForTests('tls-reload', (dir) => {
  certificate = operatorCertificate(dir);
  certificate.make(['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'], 'first');
  return { TLS_CERT_FILE: certificate.certFile, TLS_KEY_FILE: certificate.keyFile, KEEP_ALIVE_TIMEOUT_MS: '60000' };
});

const openTls = (): Promise<TLSSocket> => openTlsTo(gateway().httpsPort);

/** One keep-alive request on an open connection; resolves with the response head and body. */
function request(socket: TLSSocket, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    const onData = (chunk: Buffer): void => {
      data += chunk.toString();
      const head = data.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(data)?.[1] ?? NaN);
      if (head >= 0 && data.length - head - 4 >= length) {
        socket.off('data', onData);
        resolve(data);
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error(`connection closed; got ${data}`)));
    socket.write(
      `POST /api/v2/ingest HTTP/1.1\r\nHost: gw\r\nX-API-Key: ${TEST_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
}

const statusFingerprint = async (): Promise<{ fingerprintSha256: string; source: string }> =>
  (
    (await (await fetch(`${gateway().gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
      tls: { fingerprintSha256: string; source: string };
    }
  ).tls;

describe('SIGHUP re-reads the certificate', () => {
  it('serves the new certificate to new connections while a keep-alive connection keeps working', async () => {
    const before = await statusFingerprint();
    expect(before.source).toBe('file');
    const kept = await openTls();
    expect(kept.getPeerX509Certificate()!.fingerprint256).toBe(before.fingerprintSha256);
    expect(await request(kept, JSON.stringify({ ship_id: 's', cargo_id: 'c', value: 1 }))).toMatch(/^HTTP\/1\.1 200 /);

    certificate.make(['-newkey', 'rsa:2048'], 'second');
    gateway().gw.child.kill('SIGHUP');
    let after = before;
    for (const deadline = Date.now() + 10_000; after.fingerprintSha256 === before.fingerprintSha256 && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 50));
      after = await statusFingerprint();
    }
    expect(after.fingerprintSha256).not.toBe(before.fingerprintSha256);
    expect(gateway().gw.logs.some((line) => line.event === 'certificate_reloaded')).toBe(true);

    const fresh = await openTls();
    expect(fresh.getPeerX509Certificate()!.fingerprint256).toBe(after.fingerprintSha256);
    // An RSA certificate negotiates an ECDHE-RSA suite.
    expect(fresh.getCipher().name).toMatch(/ECDHE-RSA-(AES\d+-GCM|CHACHA20)|TLS_(AES|CHACHA20)/);
    fresh.destroy();

    expect(await request(kept, JSON.stringify({ ship_id: 's', cargo_id: 'c', value: 2 }))).toMatch(/^HTTP\/1\.1 200 /);
    kept.destroy();
    expect(gateway().gw.child.exitCode).toBeNull();
  });

  it('keeps serving the current certificate when the new files are broken', async () => {
    const { gw } = gateway();
    const { certFile } = certificate;
    const before = await statusFingerprint();
    spawnSync('sh', ['-c', `echo broken > ${certFile}`]);
    gw.child.kill('SIGHUP');
    const deadline = Date.now() + 10_000;
    while (!gw.logs.some((line) => line.event === 'certificate_reload_failed') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const failure = gw.logs.find((line) => line.event === 'certificate_reload_failed');
    expect(JSON.stringify(failure)).toContain(certFile);
    expect((await statusFingerprint()).fingerprintSha256).toBe(before.fingerprintSha256);
    const socket = await openTls();
    expect(socket.getPeerX509Certificate()!.fingerprint256).toBe(before.fingerprintSha256);
    socket.destroy();
  });
});

describe('refused certificate settings', () => {
  const bundle = (env: Record<string, string>) =>
    spawnSync(process.execPath, [inject('bundlePath')], {
      env: {
        PATH: process.env['PATH'] ?? '',
        HTTPS_PORT: '0',
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: join(gateway().dir, 'refused'),
        ...env,
      },
      encoding: 'utf8',
      timeout: 15_000,
    });

  it('names the missing half of a certificate pair', () => {
    const result = bundle({ TLS_CERT_FILE: certificate.certFile });
    expect(result.status).toBe(78);
    expect(result.stderr).toContain('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  });

  it('names the file that holds no certificate, without starting', () => {
    const result = bundle({ TLS_CERT_FILE: certificate.certFile, TLS_KEY_FILE: certificate.keyFile });
    expect(result.status).toBe(78);
    expect(result.stderr).toContain(`${certificate.certFile} holds no PEM certificate`);
  });
});
